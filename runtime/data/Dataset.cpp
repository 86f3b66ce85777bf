//===- Dataset.cpp - a token stream made of memory-mapped token files -----===//

#include "runtime/data/Dataset.h"

#include "runtime/data/TokenFile.h"
#include "runtime/support/Hash64.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "Dataset reads the little-endian token files in place: a little-endian host is needed"
#endif

namespace gptc::data {
namespace {

std::string errnoText() { return std::strerror(errno); }

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Tokens scanned between two releases of the pages read (16 MiB).
constexpr uint64_t kScanChunkTokens = uint64_t(8) << 20;

/// Calls fn(tokens, count, first) over the shard's tokens in chunks. A mapped
/// shard's pages are released from this process's resident set as each
/// chunk is done (MADV_DONTNEED on a shared read-only file mapping: the page
/// cache keeps them and a later read maps them again, with the same bytes),
/// so a full scan of a large dataset does not make it resident.
template <typename Fn>
void scanShard(const Dataset::Shard &s, Fn &&fn) {
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  for (uint64_t at = 0; at < s.count; at += kScanChunkTokens) {
    uint64_t n = std::min(kScanChunkTokens, s.count - at);
    if (!fn(s.tokens + at, n, at))
      return;
    if (s.path.empty())
      continue;
    // Whole pages only: the one the next chunk starts in stays.
    uintptr_t from = uintptr_t(s.tokens + at) & ~(page - 1);
    uintptr_t to = uintptr_t(s.tokens + at + n);
    to = at + n == s.count ? (to + page - 1) & ~(page - 1) : to & ~(page - 1);
    if (to > from)
      madvise(reinterpret_cast<void *>(from), to - from, MADV_DONTNEED);
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// MappedFile
//===----------------------------------------------------------------------===//

StatusOr<std::shared_ptr<MappedFile>> MappedFile::open(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::error(path + ": " + errnoText());
  struct stat st;
  if (fstat(fd, &st) != 0) {
    std::string why = errnoText();
    ::close(fd);
    return Status::error(path + ": cannot stat: " + why);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::error(path + ": is not a regular file");
  }
  std::shared_ptr<MappedFile> file(new MappedFile);
  file->bytes = uint64_t(st.st_size);
  if (file->bytes > 0) {
    void *p = mmap(nullptr, file->bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      std::string why = errnoText();
      ::close(fd);
      return Status::error(path + ": cannot map: " + why);
    }
    file->base = p;
  }
  ::close(fd); // the mapping keeps the file
  return file;
}

MappedFile::~MappedFile() {
  if (base)
    munmap(base, bytes);
}

//===----------------------------------------------------------------------===//
// Naming the files
//===----------------------------------------------------------------------===//

StatusOr<std::vector<std::string>> resolveTokenFiles(const std::string &spec) {
  std::vector<std::string> files;
  struct stat st;
  if (stat(spec.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode))
      return std::vector<std::string>{spec};
    DIR *dir = opendir(spec.c_str());
    if (!dir)
      return Status::error(spec + ": cannot list the directory: " + errnoText());
    while (const dirent *e = readdir(dir)) {
      std::string name = e->d_name;
      if (name[0] != '.' && endsWith(name, ".bin"))
        files.push_back(spec + (endsWith(spec, "/") ? "" : "/") + name);
    }
    closedir(dir);
    if (files.empty())
      return Status::error(spec + ": a directory with no token files (*.bin)");
    // llm.c's (and gpt-data's) shard sets keep the validation shard beside
    // the training ones: a whole folder would train on it.
    auto named = [&](const char *part) {
      for (const std::string &f : files)
        if (f.find(part, f.find_last_of('/') + 1) != std::string::npos)
          return f;
      return std::string();
    };
    std::string val = named("_val_"), train = named("_train_");
    if (!val.empty() && !train.empty()) {
      std::string prefix = train.substr(0, train.find("_train_"));
      return Status::error(spec + ": holds training and validation shards (" + val +
                           "); name them: --data '" + prefix + "_train_*.bin' --val '" +
                           val.substr(0, val.find("_val_")) + "_val_*.bin'");
    }
  } else if (spec.find_first_of("*?[") != std::string::npos) {
    glob_t g;
    int rc = glob(spec.c_str(), 0, nullptr, &g);
    if (rc == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i)
        files.push_back(g.gl_pathv[i]);
    globfree(&g);
    if (rc == GLOB_NOMATCH || (rc == 0 && files.empty()))
      return Status::error(spec + ": no file matches the pattern");
    if (rc != 0)
      return Status::error(spec + ": cannot expand the pattern");
  } else {
    return Status::error(spec + ": " + errnoText());
  }
  // Bytewise, not glob's locale collation: the same order on every host.
  std::sort(files.begin(), files.end());
  return files;
}

//===----------------------------------------------------------------------===//
// Dataset
//===----------------------------------------------------------------------===//

StatusOr<Dataset> Dataset::open(const std::string &spec) {
  StatusOr<std::vector<std::string>> files = resolveTokenFiles(spec);
  if (!files)
    return files.status();
  Dataset d;
  for (const std::string &path : *files) {
    StatusOr<std::shared_ptr<MappedFile>> file = MappedFile::open(path);
    if (!file)
      return file.status();
    const MappedFile &m = **file;
    std::string_view header(reinterpret_cast<const char *>(m.data()),
                            std::min<uint64_t>(m.size(), kTokenFileHeaderBytes));
    StatusOr<int64_t> count = parseTokenFileHeader(header, m.size());
    if (!count)
      return Status::error(path + ": " + count.status().message());
    Shard s;
    s.path = path;
    s.tokens = reinterpret_cast<const uint16_t *>(m.data() + kTokenFileHeaderBytes);
    s.count = uint64_t(*count);
    s.first = d.total;
    d.total += s.count;
    d.parts.push_back(s);
    d.owners.push_back(std::move(*file));
  }
  return d;
}

Dataset Dataset::fromTokens(std::vector<uint16_t> tokens) {
  auto owned = std::make_shared<std::vector<uint16_t>>(std::move(tokens));
  Dataset d;
  Shard s;
  s.tokens = owned->data();
  s.count = owned->size();
  d.total = s.count;
  d.parts.push_back(s);
  d.owners.push_back(std::move(owned));
  return d;
}

Status Dataset::read(uint64_t start, uint64_t count, int32_t *out, int64_t vocabSize) const {
  if (start + count > total)
    return Status::error("tokens " + std::to_string(start) + ".." +
                         std::to_string(start + count) + " are past the dataset's end (" +
                         std::to_string(total) + " tokens)");
  // The shard holding `start`: the last one whose first token is <= start.
  auto it = std::upper_bound(parts.begin(), parts.end(), start,
                             [](uint64_t at, const Shard &s) { return at < s.first; });
  size_t shard = size_t(it - parts.begin()) - 1;
  Status status = Status::ok();
  while (count > 0) {
    const Shard &s = parts[shard];
    uint64_t offset = start - s.first;
    uint64_t n = std::min(count, s.count - offset);
    const uint16_t *src = s.tokens + offset;
    uint16_t largest = 0;
    for (uint64_t i = 0; i < n; ++i) {
      out[i] = src[i];
      largest = std::max(largest, src[i]);
    }
    if (vocabSize > 0 && largest >= vocabSize && status) {
      uint64_t i = 0;
      while (src[i] < vocabSize)
        ++i;
      status = Status::error((s.path.empty() ? std::string("tokens") : s.path) + ": token " +
                             std::to_string(src[i]) + " at index " +
                             std::to_string(offset + i) +
                             " is outside the vocabulary (size " + std::to_string(vocabSize) +
                             ")");
    }
    out += n, start += n, count -= n;
    ++shard;
  }
  return status;
}

Status Dataset::checkVocabulary(int64_t vocabSize) const {
  if (vocabSize <= 0)
    return Status::ok();
  for (const Shard &s : parts) {
    Status status = Status::ok();
    scanShard(s, [&](const uint16_t *tokens, uint64_t count, uint64_t first) {
      uint16_t largest = 0;
      for (uint64_t i = 0; i < count; ++i)
        largest = std::max(largest, tokens[i]);
      if (largest < vocabSize)
        return true;
      uint64_t i = 0;
      while (tokens[i] < vocabSize)
        ++i;
      status = Status::error((s.path.empty() ? std::string("tokens") : s.path) + ": token " +
                             std::to_string(tokens[i]) + " at index " +
                             std::to_string(first + i) + " is outside the vocabulary (size " +
                             std::to_string(vocabSize) + ")");
      return false;
    });
    if (!status)
      return status;
  }
  return Status::ok();
}

uint64_t Dataset::identity() const {
  Hash64 h;
  if (parts.size() == 1) {
    scanShard(parts[0], [&](const uint16_t *tokens, uint64_t count, uint64_t) {
      h.update(tokens, count * sizeof(uint16_t));
      return true;
    });
    return h.value();
  }
  constexpr uint64_t kSample = 4096;
  for (const Shard &s : parts) {
    std::string name = s.path.substr(s.path.find_last_of('/') + 1);
    h.update(name.data(), name.size() + 1);
    h.update(&s.count, sizeof(s.count));
    uint64_t head = std::min(s.count, kSample), tail = std::min(s.count - head, kSample);
    h.update(s.tokens, head * sizeof(uint16_t));
    h.update(s.tokens + s.count - tail, tail * sizeof(uint16_t));
  }
  return h.value();
}

} // namespace gptc::data
