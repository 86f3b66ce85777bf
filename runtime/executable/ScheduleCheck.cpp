//===- ScheduleCheck.cpp - prove a program's streams are ordered ---------===//
//
// A first pass finds, per pool, the bytes two or more streams touch: only
// accesses to those can race. Then one pass over the commands in enqueue
// order:
//   1) Each stream keeps a vector clock: its own entry counts its
//      commands, the others say how far it has waited for them.
//      RecordEvent copies the recording stream's clock into the event,
//      WaitEvent joins the event's clock into the waiting stream's.
//   2) An earlier access (stream s, clock c) is ordered before a later one
//      on stream t iff s == t or t's clock has seen s at c or later.
//   3) Per pool and stream, a shadow map of disjoint byte segments keeps
//      the latest access and the latest write to each byte. Accesses on
//      one stream run in order, so only those two can be the unordered
//      one: if the latest write is ordered before a new read, every
//      earlier write is too. A new access looks up the other streams'
//      segments it overlaps; a write on a stream replaces everything under
//      it, and segments every other stream is ordered after are dropped
//      (amortized, when a map doubles), so the maps stay small.
// 1558M's train_step (3,077 commands, two streams) takes about 1 ms.
//
//===----------------------------------------------------------------------===//

#include "runtime/executable/ScheduleCheck.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace gptc {

namespace {

/// Streams one program may use here: the clocks are streams x streams.
constexpr size_t kMaxStreams = 64;

/// Segments a shadow map holds before its first sweep of retired ones;
/// tiny, so that the tests' short programs sweep too (the sweeps stay
/// amortized: each waits for the map to double).
constexpr size_t kFirstSweep = 2;

/// How a command touches a tensor.
enum class Mode : uint8_t {
  Read,
  Write,
  KernelArg, // a kernel's tensor argument: may be written, so counted as a write
};

bool writes(Mode m) { return m != Mode::Read; }

/// What a command does to `tensor`, as the error says it.
std::string does(Mode m, const std::string &tensor) {
  switch (m) {
  case Mode::Read:
    return "reads tensor " + tensor;
  case Mode::Write:
    return "writes tensor " + tensor;
  case Mode::KernelArg:
    return "passes tensor " + tensor + " to its kernel (which may write it)";
  }
  return "";
}

const char *stillVerb(Mode m) {
  switch (m) {
  case Mode::Read:
    return "read";
  case Mode::Write:
    return "write";
  case Mode::KernelArg:
    return "read or write";
  }
  return "";
}

struct Access {
  uint32_t tensor;
  Mode mode;
};

/// The tensors `cmd` touches and how.
void accessesOf(const schema::Executable &exe, const schema::Command &cmd,
                std::vector<Access> &out) {
  out.clear();
  switch (cmd.op_type()) {
  case schema::Op::LaunchKernel: {
    const auto *launch = cmd.op_as_LaunchKernel();
    if (launch->args())
      for (size_t i = 0; i < launch->args()->size(); ++i)
        if (launch->args_type()->Get(i) == schema::Arg::TensorArg)
          out.push_back({launch->args()->GetAs<schema::TensorArg>(i)->tensor(), Mode::KernelArg});
    return;
  }
  case schema::Op::RunGemm: {
    const auto *r = cmd.op_as_RunGemm();
    schema::Epilogue e = exe.gemms()->Get(r->gemm())->epilogue();
    bool biasWritten = e == schema::Epilogue::BGradA || e == schema::Epilogue::BGradB ||
                       e == schema::Epilogue::DGeluBGrad;
    bool auxWritten = e == schema::Epilogue::GeluAux || e == schema::Epilogue::BiasGeluAux;
    out.push_back({r->a(), Mode::Read});
    out.push_back({r->b(), Mode::Read});
    out.push_back({r->c(), Mode::Write}); // also read when beta != 0; the write covers it
    auto optional = [&](int64_t t, Mode m) {
      if (t >= 0)
        out.push_back({static_cast<uint32_t>(t), m});
    };
    optional(r->bias(), biasWritten ? Mode::Write : Mode::Read);
    optional(r->aux(), auxWritten ? Mode::Write : Mode::Read);
    optional(r->a_scale(), Mode::Read);
    optional(r->b_scale(), Mode::Read);
    optional(r->d_scale(), Mode::Read);
    optional(r->amax_d(), Mode::Write);
    return;
  }
  case schema::Op::Memset:
    out.push_back({cmd.op_as_Memset()->tensor(), Mode::Write});
    return;
  case schema::Op::Copy:
    out.push_back({cmd.op_as_Copy()->src(), Mode::Read});
    out.push_back({cmd.op_as_Copy()->dst(), Mode::Write});
    return;
  case schema::Op::AllReduce:
    if (const auto *tensors = cmd.op_as_AllReduce()->tensors())
      for (uint32_t t : *tensors)
        out.push_back({t, Mode::Write}); // reduced in place
    return;
  case schema::Op::Shard: {
    const auto *shard = cmd.op_as_Shard();
    if (shard->src())
      for (uint32_t t : *shard->src())
        out.push_back({t, Mode::Read});
    if (shard->dst())
      for (uint32_t t : *shard->dst())
        out.push_back({t, Mode::Write});
    return;
  }
  case schema::Op::RecordEvent:
  case schema::Op::WaitEvent:
  case schema::Op::NONE:
    return;
  }
}

/// One access as a shadow map remembers it.
struct Stamp {
  uint32_t clock = 0; // the stream's clock at the access; 0: none
  uint32_t command = 0;
  uint32_t tensor = 0;
  Mode mode = Mode::Read;
};

/// Bytes [begin, end) of a pool (begin is the map key), with one stream's
/// latest access and latest write to them.
struct Segment {
  uint64_t end;
  Stamp last, lastWrite;
};

/// One stream's accesses to one pool.
class Shadow {
public:
  /// An access to bytes of [lo, hi) that a new access from another stream
  /// must follow and may not: the latest write there (the latest access,
  /// when the new one writes) whose clock is above `seen`, the new
  /// stream's view of this stream's clock. Null when all are ordered.
  const Stamp *unordered(uint64_t lo, uint64_t hi, bool write, uint32_t seen) const {
    if ((write ? maxClock_ : maxWriteClock_) <= seen)
      return nullptr;
    auto it = segments_.upper_bound(lo);
    if (it != segments_.begin() && std::prev(it)->second.end > lo)
      --it;
    for (; it != segments_.end() && it->first < hi; ++it) {
      const Stamp &s = write ? it->second.last : it->second.lastWrite;
      if (s.clock > seen)
        return &s;
    }
    return nullptr;
  }

  /// Records an access to [lo, hi).
  void paint(uint64_t lo, uint64_t hi, const Stamp &stamp) {
    split(lo);
    split(hi);
    maxClock_ = std::max(maxClock_, stamp.clock);
    auto it = segments_.lower_bound(lo);
    if (writes(stamp.mode)) {
      // Earlier accesses under a write are ordered before it, hence before
      // whatever is ordered after it: only the write is needed.
      maxWriteClock_ = std::max(maxWriteClock_, stamp.clock);
      auto end = segments_.lower_bound(hi);
      segments_.erase(it, end);
      segments_.emplace_hint(end, lo, Segment{hi, stamp, stamp});
      return;
    }
    uint64_t pos = lo;
    for (; it != segments_.end() && it->first < hi; ++it) {
      if (it->first > pos)
        segments_.emplace_hint(it, pos, Segment{it->first, stamp, Stamp{}});
      it->second.last = stamp;
      pos = it->second.end;
    }
    if (pos < hi)
      segments_.emplace_hint(it, pos, Segment{hi, stamp, Stamp{}});
    merge(lo, hi);
  }

  /// Once the map has doubled since its last sweep, forgets the segments
  /// whose accesses every other stream is already ordered after (`seen`:
  /// the least of their views of this stream's clock): clocks only grow,
  /// so those can never race again.
  void sweep(uint32_t seen) {
    if (segments_.size() < sweepAt_)
      return;
    for (auto it = segments_.begin(); it != segments_.end();)
      it = it->second.last.clock <= seen ? segments_.erase(it) : std::next(it);
    sweepAt_ = 2 * segments_.size() + kFirstSweep;
  }

private:
  /// Cuts the segment holding byte `x` in two at x.
  void split(uint64_t x) {
    auto it = segments_.upper_bound(x);
    if (it == segments_.begin())
      return;
    --it;
    if (it->first < x && x < it->second.end) {
      Segment tail = it->second;
      it->second.end = x;
      segments_.emplace_hint(std::next(it), x, tail);
    }
  }

  static bool same(const Stamp &a, const Stamp &b) {
    return a.clock == b.clock && a.tensor == b.tensor;
  }

  /// Joins the neighbours in and around [lo, hi) that hold the same
  /// accesses, so that reading a range again keeps it one segment.
  void merge(uint64_t lo, uint64_t hi) {
    auto it = segments_.lower_bound(lo);
    if (it != segments_.begin())
      --it;
    while (it != segments_.end() && it->first <= hi) {
      auto next = std::next(it);
      if (next == segments_.end())
        return;
      if (next->first == it->second.end && same(next->second.last, it->second.last) &&
          same(next->second.lastWrite, it->second.lastWrite)) {
        it->second.end = next->second.end;
        segments_.erase(next);
      } else {
        it = next;
      }
    }
  }

  std::map<uint64_t, Segment> segments_;
  uint32_t maxClock_ = 0, maxWriteClock_ = 0;
  size_t sweepAt_ = kFirstSweep;
};

std::string quoted(const flatbuffers::String *name, const std::string &fallback) {
  return name ? "'" + name->str() + "'" : fallback;
}

std::string describe(const schema::Program &program, uint32_t command, uint32_t stream) {
  const schema::Command *cmd = program.commands()->Get(command);
  return "command " + std::to_string(command) + " (" + schema::EnumNameOp(cmd->op_type()) +
         ", stream " + std::to_string(stream) + ")";
}

/// The error for `later` on stream `laterStream` (command `command`)
/// racing `earlier` on stream `earlierStream`.
Status hazard(const schema::Executable &exe, const schema::Program &program,
              const std::string &where, uint32_t command, uint32_t laterStream,
              const Access &later, const Stamp &earlier, uint32_t earlierStream) {
  const schema::Tensor *a = exe.tensors()->Get(later.tensor);
  const schema::Tensor *b = exe.tensors()->Get(earlier.tensor);
  uint64_t lo = std::max(a->offset_bytes(), b->offset_bytes());
  uint64_t hi = std::min(a->offset_bytes() + a->size_bytes(), b->offset_bytes() + b->size_bytes());
  const schema::Pool *pool = exe.pools()->Get(a->pool());
  return Status::error(
      where + ": " + describe(program, command, laterStream) + " " +
      does(later.mode, quoted(a->name(), std::to_string(later.tensor))) + " while " +
      describe(program, earlier.command, earlierStream) + " may still " +
      stillVerb(earlier.mode) + " tensor " + quoted(b->name(), std::to_string(earlier.tensor)) +
      ": they overlap in bytes [" + std::to_string(lo) + ", " + std::to_string(hi) +
      ") of pool " + quoted(pool->name(), std::to_string(a->pool())) +
      ", and no WaitEvent orders command " + std::to_string(command) + " after command " +
      std::to_string(earlier.command));
}

/// Sorted, disjoint byte ranges [first, second) of one pool.
using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;

/// Per pool, the bytes that two or more streams touch somewhere in the
/// program. Only accesses that reach them can race; in a compiled step
/// that leaves the gradient buckets, so most accesses skip the maps.
std::unordered_map<uint32_t, Ranges>
sharedBytes(const schema::Executable &exe,
            const flatbuffers::Vector<flatbuffers::Offset<schema::Command>> &commands,
            const std::map<uint32_t, uint32_t> &dense) {
  struct Touch {
    uint32_t pool, stream;
    uint64_t lo, hi;
    bool operator<(const Touch &o) const {
      return std::tie(pool, stream, lo) < std::tie(o.pool, o.stream, o.lo);
    }
  };
  std::vector<Touch> touches;
  std::vector<Access> accesses;
  for (const schema::Command *cmd : commands) {
    accessesOf(exe, *cmd, accesses);
    for (const Access &access : accesses) {
      const schema::Tensor *t = exe.tensors()->Get(access.tensor);
      if (t->size_bytes())
        touches.push_back({t->pool(), dense.at(cmd->stream()), t->offset_bytes(),
                           t->offset_bytes() + t->size_bytes()});
    }
  }
  std::sort(touches.begin(), touches.end());
  std::unordered_map<uint32_t, Ranges> shared;
  // Per pool, each stream's merged ranges become +1/-1 edges (ends sort
  // before starts at one position: the ranges are half-open); where the
  // depth reaches 2, two streams meet.
  std::vector<std::pair<uint64_t, int>> edges;
  for (size_t i = 0; i < touches.size();) {
    uint32_t pool = touches[i].pool;
    edges.clear();
    while (i < touches.size() && touches[i].pool == pool) {
      uint32_t stream = touches[i].stream;
      uint64_t lo = touches[i].lo, hi = touches[i].hi;
      for (++i; i < touches.size() && touches[i].pool == pool && touches[i].stream == stream;
           ++i) {
        if (touches[i].lo > hi) {
          edges.push_back({lo, +1});
          edges.push_back({hi, -1});
          lo = touches[i].lo;
        }
        hi = std::max(hi, touches[i].hi);
      }
      edges.push_back({lo, +1});
      edges.push_back({hi, -1});
    }
    std::sort(edges.begin(), edges.end());
    int depth = 0;
    uint64_t start = 0;
    for (auto [at, step] : edges) {
      int before = depth;
      depth += step;
      if (before < 2 && depth >= 2)
        start = at;
      else if (before >= 2 && depth < 2 && at > start)
        shared[pool].push_back({start, at});
    }
  }
  return shared;
}

/// Whether [lo, hi) overlaps `ranges`.
bool overlaps(const Ranges &ranges, uint64_t lo, uint64_t hi) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), lo,
                             [](uint64_t x, const std::pair<uint64_t, uint64_t> &r) {
                               return x < r.second;
                             });
  return it != ranges.end() && it->first < hi;
}

/// `where` names the program in errors.
Status checkProgram(const schema::Executable &exe, const schema::Program &program,
                    const std::string &where) {
  const auto *commands = program.commands();
  if (!commands)
    return Status::ok();
  // Dense stream numbers, in order of first use: num_streams may be large.
  std::map<uint32_t, uint32_t> dense;
  std::vector<uint32_t> streamId;
  for (const schema::Command *cmd : *commands)
    if (dense.emplace(cmd->stream(), uint32_t(streamId.size())).second)
      streamId.push_back(cmd->stream());
  size_t n = streamId.size();
  if (n <= 1)
    return Status::ok();
  if (n > kMaxStreams)
    return Status::error(where + " uses " + std::to_string(n) +
                         " streams; the schedule check handles " +
                         std::to_string(kMaxStreams));

  // clocks[t * n + s]: how far stream t is ordered after stream s.
  std::vector<uint32_t> clocks(n * n, 0);
  std::unordered_map<uint32_t, std::vector<uint32_t>> recorded; // event -> clock at its record
  std::unordered_map<uint64_t, Shadow> shadows;                 // pool * n + stream
  std::unordered_map<uint32_t, Ranges> shared = sharedBytes(exe, *commands, dense);
  if (shared.empty())
    return Status::ok();
  std::vector<Access> accesses;
  for (uint32_t c = 0; c < commands->size(); ++c) {
    const schema::Command *cmd = commands->Get(c);
    uint32_t t = dense[cmd->stream()];
    uint32_t *mine = &clocks[t * n];
    uint32_t now = ++mine[t];
    if (cmd->op_type() == schema::Op::RecordEvent) {
      recorded[cmd->op_as_RecordEvent()->event()].assign(mine, mine + n);
      continue;
    }
    if (cmd->op_type() == schema::Op::WaitEvent) {
      // Not recorded yet in this program: its last record was before the
      // program's start, which every stream is already ordered after.
      auto it = recorded.find(cmd->op_as_WaitEvent()->event());
      if (it != recorded.end())
        for (size_t s = 0; s < n; ++s)
          mine[s] = std::max(mine[s], it->second[s]);
      continue;
    }
    accessesOf(exe, *cmd, accesses);
    accesses.erase(std::remove_if(accesses.begin(), accesses.end(),
                                  [&](const Access &access) {
                                    const schema::Tensor *t = exe.tensors()->Get(access.tensor);
                                    auto it = shared.find(t->pool());
                                    return t->size_bytes() == 0 || it == shared.end() ||
                                           !overlaps(it->second, t->offset_bytes(),
                                                     t->offset_bytes() + t->size_bytes());
                                  }),
                   accesses.end());
    for (const Access &access : accesses) {
      const schema::Tensor *tensor = exe.tensors()->Get(access.tensor);
      uint64_t lo = tensor->offset_bytes(), hi = lo + tensor->size_bytes();
      for (uint32_t s = 0; s < n; ++s) {
        if (s == t)
          continue;
        auto it = shadows.find(uint64_t(tensor->pool()) * n + s);
        if (it == shadows.end())
          continue;
        if (const Stamp *earlier = it->second.unordered(lo, hi, writes(access.mode), mine[s]))
          return hazard(exe, program, where, c, cmd->stream(), access, *earlier, streamId[s]);
      }
    }
    // After the checks: a command never races itself.
    uint32_t seen = ~0u; // by every other stream, of this one
    for (size_t u = 0; u < n; ++u)
      if (u != t)
        seen = std::min(seen, clocks[u * n + t]);
    for (const Access &access : accesses) {
      const schema::Tensor *tensor = exe.tensors()->Get(access.tensor);
      uint64_t lo = tensor->offset_bytes(), hi = lo + tensor->size_bytes();
      Shadow &shadow = shadows[uint64_t(tensor->pool()) * n + t];
      shadow.paint(lo, hi, Stamp{now, c, access.tensor, access.mode});
      shadow.sweep(seen);
    }
  }
  return Status::ok();
}

} // namespace

Status checkSchedule(const schema::Executable &exe) {
  if (!exe.programs())
    return Status::ok();
  for (size_t p = 0; p < exe.programs()->size(); ++p) {
    const schema::Program *program = exe.programs()->Get(p);
    std::string where = program->name() ? "program '" + program->name()->str() + "'"
                                        : "program " + std::to_string(p);
    if (Status s = checkProgram(exe, *program, where); !s)
      return s;
  }
  return Status::ok();
}

} // namespace gptc
