//===- TokenShards.cpp - token files written as a stream, and llm.c shards ===//

#include "runtime/data/TokenShards.h"

#include "runtime/data/TokenFile.h"
#include "runtime/support/FileIO.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gptc::data {
namespace {

/// Bytes of tokens gathered before one write(2).
constexpr size_t kWriteBuffer = size_t(1) << 20;

void putLE32(char *out, int32_t value) {
  uint32_t v = static_cast<uint32_t>(value);
  for (int i = 0; i < 4; ++i)
    out[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

} // namespace

//===----------------------------------------------------------------------===//
// TokenFileWriter
//===----------------------------------------------------------------------===//

StatusOr<std::unique_ptr<TokenFileWriter>> TokenFileWriter::create(const std::string &path) {
  std::unique_ptr<TokenFileWriter> w(new TokenFileWriter);
  w->target = path;
  w->temporary = path + ".tmp-XXXXXX";
  w->fd = ::mkstemp(w->temporary.data());
  if (w->fd < 0)
    return Status::error(path + ": cannot create a temporary file in " + dirName(path) + ": " +
                         errnoText());
  // mkstemp makes 0600 files; token files are data to share, as before.
  ::fchmod(w->fd, 0644);
  // The header's place; its count is written by commit().
  w->buffer.assign(kTokenFileHeaderBytes, '\0');
  w->buffer.reserve(kWriteBuffer + kTokenFileHeaderBytes);
  return w;
}

TokenFileWriter::~TokenFileWriter() {
  if (fd >= 0)
    ::close(fd);
  if (!committed && !temporary.empty())
    ::unlink(temporary.c_str());
}

Status TokenFileWriter::flush() {
  if (buffer.empty())
    return Status::ok();
  if (Status s = writeAll(fd, buffer.data(), buffer.size()); !s)
    return Status::error(target + ": " + s.message());
  buffer.clear();
  return Status::ok();
}

Status TokenFileWriter::append(const int32_t *ids, size_t count) {
  if (committed || fd < 0)
    return Status::error(target + ": append after commit");
  if (count > kMaxTokensPerFile - tokens)
    return Status::error(target + ": more than " + std::to_string(kMaxTokensPerFile) +
                         " tokens do not fit one llm.c token file (its header counts in int32)");
  for (size_t i = 0; i < count; ++i) {
    int32_t t = ids[i];
    if (t < 0 || t > 0xFFFF)
      return Status::error(target + ": token " + std::to_string(t) + " at index " +
                           std::to_string(tokens + i) + " does not fit uint16");
    buffer.push_back(static_cast<char>(t & 0xFF));
    buffer.push_back(static_cast<char>(t >> 8));
    if (buffer.size() >= kWriteBuffer)
      if (Status s = flush(); !s)
        return s;
  }
  tokens += count;
  return Status::ok();
}

Status TokenFileWriter::commit() {
  if (committed || fd < 0)
    return Status::error(target + ": committed twice");
  if (Status s = flush(); !s)
    return s;
  char header[12];
  putLE32(header, kTokenFileMagic);
  putLE32(header + 4, kTokenFileVersion);
  putLE32(header + 8, static_cast<int32_t>(tokens));
  if (::pwrite(fd, header, sizeof(header), 0) != ssize_t(sizeof(header)))
    return Status::error(target + ": cannot write the header: " + errnoText());
  if (::fsync(fd) != 0)
    return Status::error(target + ": fsync failed: " + errnoText());
  int rc = ::close(fd);
  fd = -1;
  if (rc != 0)
    return Status::error(target + ": close failed: " + errnoText());
  if (::rename(temporary.c_str(), target.c_str()) != 0)
    return Status::error(target + ": cannot rename " + temporary + " into place: " +
                         errnoText());
  committed = true;
  // The rename is durable once the directory is.
  std::string dir = dirName(target);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// One file
//===----------------------------------------------------------------------===//

Status SingleFileSink::write(const std::vector<int32_t> &ids, const std::vector<size_t> &) {
  if (!file) {
    StatusOr<std::unique_ptr<TokenFileWriter>> f = TokenFileWriter::create(target);
    if (!f)
      return f.status();
    file = std::move(*f);
  }
  if (ids.size() > kMaxTokensPerFile - total)
    return Status::error(target + ": more than " + std::to_string(kMaxTokensPerFile) +
                         " tokens do not fit one llm.c token file: write shards instead (-o "
                         "DIR/ or -o PREFIX, with --shard-tokens)");
  total += ids.size();
  return file->append(ids.data(), ids.size());
}

Status SingleFileSink::finish() {
  if (!file)
    if (Status s = write({}, {}); !s)
      return s;
  if (Status s = file->commit(); !s)
    return s;
  written = true;
  return Status::ok();
}

void SingleFileSink::discard() {
  file.reset();
  if (written)
    ::unlink(target.c_str());
  written = false;
}

//===----------------------------------------------------------------------===//
// Shards
//===----------------------------------------------------------------------===//

std::string shardPath(const std::string &prefix, const std::string &split, uint64_t index) {
  char number[32];
  std::snprintf(number, sizeof(number), "%06llu", static_cast<unsigned long long>(index));
  return prefix + "_" + split + "_" + number + ".bin";
}

StatusOr<std::vector<std::string>> existingShards(const std::string &prefix) {
  std::string dir = dirName(prefix);
  std::string base = prefix.substr(prefix.find_last_of('/') + 1);
  std::vector<std::string> found;
  DIR *d = ::opendir(dir.c_str());
  if (!d) {
    if (errno == ENOENT)
      return found;
    return Status::error(dir + ": cannot list the directory: " + errnoText());
  }
  while (const dirent *e = ::readdir(d)) {
    std::string name = e->d_name;
    for (const char *split : {"_train_", "_val_"}) {
      std::string head = base + split;
      if (name.size() <= head.size() + 4 || name.compare(0, head.size(), head) != 0 ||
          name.compare(name.size() - 4, 4, ".bin") != 0)
        continue;
      std::string digits = name.substr(head.size(), name.size() - head.size() - 4);
      if (std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
        found.push_back(dir == "." && prefix.find('/') == std::string::npos
                            ? name
                            : dir + "/" + name);
    }
  }
  ::closedir(d);
  std::sort(found.begin(), found.end());
  return found;
}

Status ShardedTokenWriter::closeShard() {
  if (!current)
    return Status::ok();
  if (Status s = current->commit(); !s)
    return s;
  Shard shard{current->path(), currentIsVal, current->count()};
  current.reset();
  done.push_back(shard);
  if (shardDone)
    shardDone(done.back());
  return Status::ok();
}

Status ShardedTokenWriter::put(const int32_t *ids, size_t count) {
  while (count > 0) {
    if (!current) {
      StatusOr<std::unique_ptr<TokenFileWriter>> f =
          TokenFileWriter::create(shardPath(opts.prefix, inVal ? "val" : "train", nextIndex));
      if (!f)
        return f.status();
      current = std::move(*f);
      currentIsVal = inVal;
      ++nextIndex;
    }
    // Validation shards end at a document start (write()); training shards
    // at exactly shardTokens, as llm.c's.
    size_t n = inVal ? count
                     : size_t(std::min<uint64_t>(count, opts.shardTokens - current->count()));
    if (Status s = current->append(ids, n); !s)
      return s;
    (inVal ? valCount : trainCount) += n;
    ids += n, count -= n;
    if (!inVal && current->count() == opts.shardTokens)
      if (Status s = closeShard(); !s)
        return s;
  }
  return Status::ok();
}

Status ShardedTokenWriter::write(const std::vector<int32_t> &ids,
                                 const std::vector<size_t> &documentStarts) {
  if (opts.shardTokens == 0 || opts.shardTokens > kMaxTokensPerFile)
    return Status::error("shard size " + std::to_string(opts.shardTokens) +
                         " is not in 1.." + std::to_string(kMaxTokensPerFile));
  if (!started) {
    started = true;
    inVal = opts.valTokens > 0 || opts.valDocuments > 0;
  }
  size_t at = 0;
  for (size_t i = 0; i <= documentStarts.size(); ++i) {
    size_t end = i < documentStarts.size() ? documentStarts[i] : ids.size();
    if (Status s = put(ids.data() + at, end - at); !s)
      return s;
    at = end;
    if (i == documentStarts.size())
      break;
    // A document starts at `end`: the validation split may end before it.
    if (inVal) {
      bool full = (opts.valTokens > 0 && valCount >= opts.valTokens) ||
                  (opts.valDocuments > 0 && valDocs >= opts.valDocuments);
      if (full || (current && current->count() >= opts.shardTokens))
        if (Status s = closeShard(); !s)
          return s;
      if (full)
        inVal = false;
      else
        ++valDocs;
    }
  }
  return Status::ok();
}

Status ShardedTokenWriter::finish() {
  if (Status s = closeShard(); !s)
    return s;
  if (trainCount == 0)
    return Status::error(
        valCount == 0
            ? std::string("no tokens to write")
            : "all " + std::to_string(valCount) + " tokens (" + std::to_string(valDocs) +
                  " documents) went to the validation split, none to training: ask for a "
                  "smaller split");
  return Status::ok();
}

void ShardedTokenWriter::discard() {
  current.reset();
  for (const Shard &s : done)
    ::unlink(s.path.c_str());
  done.clear();
}

} // namespace gptc::data
