//===- Corpus.cpp - text corpora encoded as a stream, on every core -------===//

#include "runtime/data/Corpus.h"

#include "runtime/data/Json.h"
#include "runtime/data/Unicode.h"
#include "runtime/support/FileIO.h"

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gptc::data {
namespace {

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

} // namespace

bool looksLikeJsonLines(const std::string &path) {
  return endsWith(path, ".jsonl") || endsWith(path, ".json");
}

//===----------------------------------------------------------------------===//
// Naming the files
//===----------------------------------------------------------------------===//

StatusOr<std::vector<CorpusFile>> resolveCorpus(const std::vector<std::string> &specs,
                                                CorpusFormat format) {
  namespace fs = std::filesystem;
  std::vector<CorpusFile> files;
  auto add = [&](const std::string &path) -> Status {
    if (Status s = checkInputFile(path, UINT64_MAX); !s)
      return s;
    CorpusFile f;
    f.path = path;
    f.jsonLines = format == CorpusFormat::JsonLines ||
                  (format == CorpusFormat::Auto && looksLikeJsonLines(path));
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode))
      f.bytes = uint64_t(st.st_size);
    files.push_back(std::move(f));
    return Status::ok();
  };
  for (const std::string &spec : specs) {
    std::error_code ec;
    if (!fs::is_directory(spec, ec)) {
      if (Status s = add(spec); !s)
        return s;
      continue;
    }
    std::vector<std::string> found;
    fs::recursive_directory_iterator it(spec, ec), end;
    if (ec)
      return Status::error(spec + ": cannot list the directory: " + ec.message());
    for (; it != end; it.increment(ec)) {
      if (ec)
        return Status::error(spec + ": cannot list the directory: " + ec.message());
      std::string name = it->path().filename().string();
      if (!name.empty() && name[0] == '.') {
        if (it->is_directory(ec))
          it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file(ec) && !endsWith(name, ".bin"))
        found.push_back(it->path().string());
    }
    if (found.empty())
      return Status::error(spec + ": a directory with no text files (names starting with '.' "
                                  "and token files *.bin are skipped)");
    // Bytewise, not the locale's collation: the same order on every host.
    std::sort(found.begin(), found.end());
    for (const std::string &path : found)
      if (Status s = add(path); !s)
        return s;
  }
  return files;
}

namespace {

/// UTF-8's length for a lead byte (1 for a byte that cannot lead).
size_t utf8Length(uint8_t lead) {
  return lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
}

/// Whether the code point that ends just before text[end] (end >= 1) is a
/// valid one that is not white space.
bool nonSpaceBefore(std::string_view text, size_t end) {
  size_t start = end - 1;
  while (start > 0 && end - start < 4 && (uint8_t(text[start]) & 0xC0) == 0x80)
    --start;
  CodePoint cp = decodeUtf8(text, start);
  return cp.valid && start + cp.length == end && classify(cp.value) != CharClass::Space;
}

} // namespace

size_t findPieceEnd(std::string_view text, size_t from, size_t target) {
  if (target > text.size() || from > text.size() - target)
    return std::string_view::npos;
  for (size_t at = text.find('\n', std::max<size_t>(from + target, 1));
       at != std::string_view::npos && at + 1 < text.size(); at = text.find('\n', at + 1)) {
    // The code point after the "\n" must be whole in `text` to be judged:
    // else a longer text might cut here, a shorter one not.
    if (at + 1 + utf8Length(uint8_t(text[at + 1])) > text.size())
      return std::string_view::npos;
    CodePoint next = decodeUtf8(text, at + 1);
    if (next.valid && classify(next.value) != CharClass::Space && nonSpaceBefore(text, at))
      return at + 1;
  }
  return std::string_view::npos;
}

namespace {

//===----------------------------------------------------------------------===//
// Pieces
//===----------------------------------------------------------------------===//

/// A piece of one file to encode, and its result.
struct Piece {
  const CorpusFile *file = nullptr;
  std::string text;
  uint64_t offset = 0; // of text[0] in the file
  uint64_t line = 1;   // of text's first line
  // Text files: the offsets in `text` where documents begin (ascending; an
  // empty document at the end of a file begins at text.size()). Short
  // documents share a piece; each is encoded on its own.
  std::vector<size_t> textStarts;
  std::vector<int32_t> ids;
  std::vector<size_t> starts; // indices in ids where documents begin
  Status status = Status::ok();
};

/// Cuts the files into pieces of at least `pieceBytes` (but a file's last),
/// reading each in `readBytes` blocks. Where pieces end depends on the text
/// alone, not on the reads.
class Reader {
public:
  Reader(const std::vector<CorpusFile> &files, const CorpusOptions &options)
      : files(files), opts(options) {}
  ~Reader() {
    if (fd >= 0)
      ::close(fd);
  }

  /// The next piece into `p`: true, or false after the last.
  StatusOr<bool> next(Piece &p) {
    p = Piece();
    while (true) {
      if (fd < 0) {
        if (p.file || index == files.size()) // a piece holds one file's text
          return p.file != nullptr;
        if (Status s = open(); !s)
          return s;
      }
      StatusOr<bool> appended = appendSegment(p, opts.pieceBytes - p.text.size());
      if (!appended)
        return appended.status();
      if (*appended && p.text.size() >= opts.pieceBytes)
        return true;
    }
  }

private:
  /// Appends the next segment of the open file to `p`: text up to a cut at
  /// least `want` bytes on, or to the end of a document (text files), or to
  /// the end of the file. False, with the file closed, when it has no more.
  StatusOr<bool> appendSegment(Piece &p, size_t want) {
    const CorpusFile &file = files[index];
    while (true) {
      std::string_view v(buffer);
      size_t end = std::string_view::npos;
      bool endsDocument = false;
      if (file.jsonLines) {
        // Whole lines: up to the first "\n" at or after `want`.
        if (want < v.size() - pos)
          if (size_t nl = v.find('\n', pos + want); nl != std::string_view::npos)
            end = nl + 1;
      } else {
        size_t cut = findPieceEnd(v, pos, want);
        if (opts.splitOnBlankLines) {
          // The first "\n\n" that ends at or before the cut, if any: the
          // document ends there. (No "\n\n" ends just after a cut, whose
          // next character is not white space.)
          std::string_view upTo = v.substr(0, cut == std::string_view::npos ? v.size() : cut);
          if (size_t blank = upTo.find("\n\n", pos); blank != std::string_view::npos) {
            cut = blank + 2;
            endsDocument = true;
          }
        }
        end = cut;
      }
      if (end == std::string_view::npos && eof) {
        if (pos == v.size() && !(startPending && !file.jsonLines)) {
          ::close(fd);
          fd = -1;
          ++index;
          return false;
        }
        end = v.size();
      }
      if (end == std::string_view::npos) {
        if (Status s = fill(); !s)
          return s;
        continue;
      }
      if (!p.file) {
        p.file = &file;
        p.offset = bufferOffset + pos;
        p.line = line;
      }
      if (startPending && !file.jsonLines)
        p.textStarts.push_back(p.text.size());
      startPending = endsDocument;
      size_t before = p.text.size();
      p.text.append(v.substr(pos, end - pos));
      if (file.jsonLines)
        line += uint64_t(std::count(p.text.begin() + before, p.text.end(), '\n'));
      pos = end;
      return true;
    }
  }

private:
  Status open() {
    const std::string &path = files[index].path;
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return Status::error(path + ": " + errnoText());
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    buffer.clear();
    pos = 0;
    bufferOffset = 0;
    line = 1;
    eof = false;
    startPending = true; // every text file starts a document
    return Status::ok();
  }

  /// Reads the next block, dropping what was consumed when that is most.
  Status fill() {
    if (pos > 0 && pos >= buffer.size() / 2) {
      buffer.erase(0, pos);
      bufferOffset += pos;
      pos = 0;
    }
    size_t old = buffer.size();
    buffer.resize(old + opts.readBytes);
    ssize_t n;
    do
      n = ::read(fd, &buffer[old], opts.readBytes);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
      buffer.resize(old);
      return Status::error(files[index].path + ": read failed: " + errnoText());
    }
    buffer.resize(old + size_t(n));
    eof = n == 0;
    return Status::ok();
  }

  const std::vector<CorpusFile> &files;
  const CorpusOptions &opts;
  size_t index = 0; // the file open or to open next
  int fd = -1;
  std::string buffer;
  size_t pos = 0;            // the next piece starts at buffer[pos]
  uint64_t bufferOffset = 0; // buffer[0]'s offset in the file
  uint64_t line = 1;
  bool eof = false;
  bool startPending = false;
};

std::string kindOf(const JsonValue &v) {
  switch (v.kind) {
  case JsonValue::Kind::Null: return "null";
  case JsonValue::Kind::Bool: return "a boolean";
  case JsonValue::Kind::Number: return "a number";
  case JsonValue::Kind::String: return "a string";
  case JsonValue::Kind::Array: return "an array";
  case JsonValue::Kind::Object: return "an object";
  }
  return "a value";
}

/// Encodes a piece of JSON lines: a document per object.
void encodeJsonLines(Piece &p, Tokenizer &tok, const CorpusOptions &o) {
  std::string_view text = p.text;
  uint64_t lineNo = p.line;
  for (size_t at = 0; at < text.size(); ++lineNo) {
    size_t nl = text.find('\n', at);
    size_t end = nl == std::string_view::npos ? text.size() : nl;
    std::string_view line = text.substr(at, end - at);
    at = end + 1;
    // A byte-order mark before the first line is not JSON.
    if (p.offset == 0 && lineNo == 1 && line.substr(0, 3) == "\xEF\xBB\xBF")
      line.remove_prefix(3);
    auto where = [&] { return p.file->path + ":" + std::to_string(lineNo) + ": "; };
    if (line.find_first_not_of(" \t\r") == std::string_view::npos)
      continue;
    StatusOr<JsonValue> v = parseJsonLine(line);
    if (!v) {
      std::string hint;
      if (lineNo == 1 && line.find_first_not_of(" \t\r") != std::string_view::npos &&
          line[line.find_first_not_of(" \t\r")] == '[')
        hint = " (JSON lines hold one object per line, not an array)";
      p.status = Status::error(where() + "bad JSON: " + v.status().message() + hint);
      return;
    }
    if (v->kind != JsonValue::Kind::Object) {
      p.status = Status::error(where() + kindOf(*v) +
                               ", not an object (JSON lines hold one object per line)");
      return;
    }
    const JsonValue *field = v->find(o.textField);
    if (!field) {
      std::string names;
      for (size_t i = 0; i < v->object.size() && i < 8; ++i)
        names += (i ? ", " : "") + quoteJson(v->object[i].first);
      if (v->object.size() > 8)
        names += ", ...";
      p.status = Status::error(where() + "no \"" + o.textField + "\" member (" +
                               (names.empty() ? std::string("an empty object")
                                              : "it has " + names) +
                               "; --text-field NAME reads another)");
      return;
    }
    if (field->kind != JsonValue::Kind::String) {
      p.status = Status::error(where() + "\"" + o.textField + "\" is " + kindOf(*field) +
                               ", not a string");
      return;
    }
    p.starts.push_back(p.ids.size());
    p.ids.push_back(tok.endOfText());
    tok.encode(field->string, p.ids, o.allowSpecial);
  }
}

void encodePiece(Piece &p, Tokenizer &tok, const CorpusOptions &o) {
  if (p.file->jsonLines) {
    encodeJsonLines(p, tok, o);
    return;
  }
  if (size_t bad = findInvalidUtf8(p.text); bad != p.text.size()) {
    p.status = Status::error(p.file->path + ": not UTF-8 text (invalid byte at offset " +
                             std::to_string(p.offset + bad) + ")");
    return;
  }
  p.ids.reserve(p.text.size() / 3 + 1);
  // Segments between document starts, each encoded on its own.
  std::string_view text = p.text;
  size_t at = 0;
  for (size_t i = 0; i <= p.textStarts.size(); ++i) {
    size_t end = i < p.textStarts.size() ? p.textStarts[i] : text.size();
    if (end > at)
      tok.encode(text.substr(at, end - at), p.ids, o.allowSpecial);
    at = end;
    if (i < p.textStarts.size()) {
      p.starts.push_back(p.ids.size());
      p.ids.push_back(tok.endOfText());
    }
  }
}

//===----------------------------------------------------------------------===//
// The workers
//===----------------------------------------------------------------------===//

struct Batch {
  std::vector<Piece> pieces;
  size_t remaining = 0; // pieces not yet encoded, under Workers::mutex
};

/// Threads that each encode pieces with their own copy of the tokenizer
/// (encode() memoises, so a copy is not shared).
class Workers {
public:
  Workers(const Tokenizer &tok, unsigned count, const CorpusOptions &options) : opts(options) {
    for (unsigned i = 0; i < count; ++i)
      threads.emplace_back([this, &tok] { run(tok); });
  }
  ~Workers() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop = true;
      queue.clear();
    }
    wake.notify_all();
    for (std::thread &t : threads)
      t.join();
  }

  void submit(Batch &b) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      b.remaining = b.pieces.size();
      for (Piece &p : b.pieces)
        queue.push_back({&b, &p});
    }
    wake.notify_all();
  }

  void wait(Batch &b) {
    std::unique_lock<std::mutex> lock(mutex);
    finished.wait(lock, [&] { return b.remaining == 0; });
  }

private:
  void run(const Tokenizer &shared) {
    Tokenizer tok = shared;
    while (true) {
      std::pair<Batch *, Piece *> job;
      {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait(lock, [&] { return stop || !queue.empty(); });
        if (stop)
          return;
        job = queue.front();
        queue.pop_front();
      }
      encodePiece(*job.second, tok, opts);
      bool last;
      {
        std::lock_guard<std::mutex> lock(mutex);
        last = --job.first->remaining == 0;
      }
      if (last)
        finished.notify_all();
    }
  }

  const CorpusOptions &opts;
  std::vector<std::thread> threads;
  std::mutex mutex;
  std::condition_variable wake, finished;
  std::deque<std::pair<Batch *, Piece *>> queue;
  bool stop = false;
};

} // namespace

StatusOr<CorpusStats> encodeCorpus(const std::vector<CorpusFile> &files,
                                   const Tokenizer &tokenizer, const CorpusOptions &options,
                                   TokenSink &sink,
                                   const std::function<void(const CorpusStats &)> &progress) {
  CorpusOptions o = options;
  o.threads = std::max(1u, o.threads);
  o.pieceBytes = std::max<size_t>(1, o.pieceBytes);
  o.readBytes = std::max<size_t>(1, o.readBytes);
  CorpusStats stats;
  for (const CorpusFile &f : files)
    stats.bytesTotal += f.bytes;
  // Text in one batch: a few pieces per thread, so that threads that finish
  // early take pieces of the next batch while the last ones finish.
  const size_t batchBytes =
      o.batchBytes ? o.batchBytes
                   : std::clamp<size_t>(size_t(o.threads) * 2 * o.pieceBytes, size_t(4) << 20,
                                        size_t(64) << 20);
  // Batches read but not yet written: one being written, one encoding, one
  // read ahead, so that neither the reader nor the writer (both serial)
  // leaves the workers idle; it bounds the memory too.
  constexpr size_t kMaxInFlight = 3;

  // Shared by the reader thread and this one (the writer), under `mutex`.
  // Declared before the workers, which are stopped first: they hold
  // pointers into these batches.
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::unique_ptr<Batch>> inFlight;
  bool readDone = false, cancelled = false;
  Status readError = Status::ok();

  Workers workers(tokenizer, o.threads, o);
  std::thread readerThread([&] {
    Reader reader(files, o);
    bool more = true;
    while (more) {
      {
        std::unique_lock<std::mutex> lock(mutex);
        changed.wait(lock, [&] { return cancelled || inFlight.size() < kMaxInFlight; });
        if (cancelled)
          break;
      }
      auto batch = std::make_unique<Batch>();
      size_t bytes = 0;
      Status error = Status::ok();
      while (bytes < batchBytes) {
        Piece p;
        StatusOr<bool> got = reader.next(p);
        if (!got || !*got) {
          if (!got)
            error = got.status();
          more = false;
          break;
        }
        bytes += p.text.size();
        batch->pieces.push_back(std::move(p));
      }
      if (!batch->pieces.empty())
        workers.submit(*batch);
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (!batch->pieces.empty())
          inFlight.push_back(std::move(batch));
        if (!more) {
          readDone = true;
          readError = error;
        }
      }
      changed.notify_all();
    }
  });
  // Stops the reader on any return; it must end before the workers do.
  struct JoinReader {
    std::thread &t;
    std::mutex &m;
    std::condition_variable &cv;
    bool &cancelled;
    ~JoinReader() {
      {
        std::lock_guard<std::mutex> lock(m);
        cancelled = true;
      }
      cv.notify_all();
      t.join();
    }
  } joinReader{readerThread, mutex, changed, cancelled};

  // Writes the batches in input order as the workers finish them.
  while (true) {
    Batch *b;
    {
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait(lock, [&] { return !inFlight.empty() || readDone; });
      if (inFlight.empty())
        break;
      b = inFlight.front().get();
    }
    workers.wait(*b);
    for (Piece &p : b->pieces) {
      if (!p.status)
        return p.status;
      if (Status s = sink.write(p.ids, p.starts); !s)
        return s;
      stats.tokens += p.ids.size();
      stats.documents += p.starts.size();
      stats.bytesDone += p.text.size();
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      inFlight.pop_front();
    }
    changed.notify_all();
    if (progress)
      progress(stats);
  }
  std::lock_guard<std::mutex> lock(mutex);
  if (!readError)
    return readError;
  return stats;
}

} // namespace gptc::data
