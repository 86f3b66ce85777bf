//===- Safetensors.cpp - Hugging Face's safetensors format ----------------===//

#include "runtime/checkpoint/Safetensors.h"

#include "runtime/data/Json.h"
#include "runtime/support/FileIO.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gptc::safetensors {

namespace {

// The reference implementation's bound: a longer header is an attack or
// a corrupt length, not a model.
constexpr uint64_t kMaxHeader = 100u << 20;

using data::JsonValue;

bool parseDType(const std::string &s, DType &out) {
  for (DType d : {DType::F32, DType::BF16, DType::F16, DType::I32})
    if (s == dtypeName(d)) {
      out = d;
      return true;
    }
  return false;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s;
  for (int64_t d : shape)
    s += (s.empty() ? "" : ", ") + std::to_string(d);
  return "[" + s + "]";
}

/// The JSON header, unpadded: tensors in the given order, then metadata.
std::string headerJson(const std::vector<TensorRef> &tensors,
                       const std::map<std::string, std::string> &metadata) {
  std::string h = "{";
  if (!metadata.empty()) {
    h += "\"__metadata__\":{";
    bool first = true;
    for (const auto &[k, v] : metadata) {
      h += (first ? "" : ",") + data::quoteJson(k) + ":" + data::quoteJson(v);
      first = false;
    }
    h += "}";
  }
  uint64_t offset = 0;
  for (const TensorRef &t : tensors) {
    h += (h.size() > 1 ? "," : "") + data::quoteJson(t.name) + ":{\"dtype\":\"" +
         dtypeName(t.dtype) + "\",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); ++i)
      h += (i ? "," : "") + std::to_string(t.shape[i]);
    h += "],\"data_offsets\":[" + std::to_string(offset) + "," +
         std::to_string(offset + t.size) + "]}";
    offset += t.size;
  }
  return h + "}";
}

/// Sorts by name and checks each tensor's size against its shape; returns
/// the padded header.
StatusOr<std::string> prepare(std::vector<TensorRef> &tensors,
                              const std::map<std::string, std::string> &metadata) {
  std::sort(tensors.begin(), tensors.end(),
            [](const TensorRef &a, const TensorRef &b) { return a.name < b.name; });
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorRef &t = tensors[i];
    if (t.name == "__metadata__" || (i && tensors[i - 1].name == t.name))
      return Status::error("safetensors: bad or duplicate tensor name '" + t.name + "'");
    uint64_t elements = 1;
    for (int64_t d : t.shape)
      elements *= uint64_t(d);
    if (elements * dtypeSize(t.dtype) != t.size)
      return Status::error("safetensors: tensor '" + t.name + "' has " + std::to_string(t.size) +
                           " bytes, its shape " + shapeText(t.shape) + " needs " +
                           std::to_string(elements * dtypeSize(t.dtype)));
  }
  std::string h = headerJson(tensors, metadata);
  h.append((8 - h.size() % 8) % 8, ' ');
  return h;
}

} // namespace

const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32: return "F32";
  case DType::BF16: return "BF16";
  case DType::F16: return "F16";
  case DType::I32: return "I32";
  }
  return "?";
}

size_t dtypeSize(DType dtype) { return dtype == DType::F32 || dtype == DType::I32 ? 4 : 2; }

const TensorView *File::find(const std::string &name) const {
  for (const TensorView &t : tensors_)
    if (t.name == name)
      return &t;
  return nullptr;
}

StatusOr<File> File::read(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return Status::error(path + ": cannot open: " + errnoText());
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    bool dir = S_ISDIR(st.st_mode);
    ::close(fd);
    return Status::error(path + (dir ? ": is a directory, not a safetensors file"
                                     : ": not a regular file"));
  }
  std::vector<uint8_t> bytes(size_t(st.st_size));
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      Status s = Status::error(path + ": read error: " + errnoText());
      ::close(fd);
      return s;
    }
    if (n == 0)
      break;
    got += size_t(n);
  }
  ::close(fd);
  bytes.resize(got);
  return parse(std::move(bytes), path);
}

StatusOr<File> File::parse(std::vector<uint8_t> bytes, const std::string &origin) {
  auto bad = [&](const std::string &why) { return Status::error(origin + ": " + why); };
  if (bytes.size() < 8)
    return bad("truncated safetensors file (" + std::to_string(bytes.size()) +
               " bytes, no header length)");
  uint64_t headerSize = 0;
  for (int i = 7; i >= 0; --i)
    headerSize = headerSize << 8 | bytes[size_t(i)];
  if (headerSize > bytes.size() - 8 || headerSize > kMaxHeader)
    return bad("header length " + std::to_string(headerSize) + " exceeds the " +
               std::to_string(bytes.size() - 8) +
               " bytes after it: truncated, or not a safetensors file");
  std::string_view text(reinterpret_cast<const char *>(bytes.data()) + 8, size_t(headerSize));
  StatusOr<JsonValue> json = data::parseJson(text);
  if (!json)
    return bad("header is not valid JSON: " + json.status().message());
  if (json->kind != JsonValue::Kind::Object)
    return bad("header is not a JSON object");

  File f;
  f.origin_ = origin;
  const uint8_t *base = bytes.data() + 8 + headerSize;
  const uint64_t dataSize = bytes.size() - 8 - headerSize;
  struct Span {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Span> spans;
  for (const auto &[name, v] : json->object) {
    if (name == "__metadata__") {
      if (v.kind != JsonValue::Kind::Object)
        return bad("__metadata__ is not an object");
      for (const auto &[k, mv] : v.object) {
        if (mv.kind != JsonValue::Kind::String)
          return bad("__metadata__ value '" + k + "' is not a string");
        f.metadata_[k] = mv.string;
      }
      continue;
    }
    auto badTensor = [&](const std::string &why) { return bad("tensor '" + name + "': " + why); };
    if (v.kind != JsonValue::Kind::Object)
      return badTensor("entry is not an object");
    for (const auto &[k, unused] : v.object)
      if (k != "dtype" && k != "shape" && k != "data_offsets")
        return badTensor("unknown key '" + k + "'");
    const JsonValue *dtype = v.find("dtype"), *shape = v.find("shape"),
                    *offsets = v.find("data_offsets");
    if (!dtype || !shape || !offsets)
      return badTensor("needs dtype, shape and data_offsets");
    TensorView t;
    t.name = name;
    if (dtype->kind != JsonValue::Kind::String || !parseDType(dtype->string, t.dtype))
      return badTensor("dtype " + (dtype->kind == JsonValue::Kind::String ? dtype->string : "?") +
                       " is not one gptc reads (F32, BF16, F16, I32)");
    if (shape->kind != JsonValue::Kind::Array || shape->array.size() > 8)
      return badTensor("shape is not a list of at most 8 dimensions");
    uint64_t elements = 1;
    for (const JsonValue &d : shape->array) {
      // 2^40 elements per dimension is far beyond any file that fits in memory.
      if (d.kind != JsonValue::Kind::Number || !d.isInteger || d.integer < 0 ||
          d.integer > (int64_t(1) << 40))
        return badTensor("shape has a dimension that is not a small non-negative integer");
      t.shape.push_back(d.integer);
      elements = d.integer == 0 ? 0 : elements;
      if (elements && elements > (uint64_t(1) << 50) / uint64_t(d.integer))
        return badTensor("shape " + shapeText(t.shape) + " is too large");
      elements *= uint64_t(d.integer);
    }
    if (offsets->kind != JsonValue::Kind::Array || offsets->array.size() != 2)
      return badTensor("data_offsets is not [begin, end]");
    const JsonValue &b = offsets->array[0], &e = offsets->array[1];
    if (!b.isInteger || !e.isInteger || b.integer < 0 || e.integer < b.integer)
      return badTensor("data_offsets is not [begin, end] with 0 <= begin <= end");
    if (uint64_t(e.integer) > dataSize)
      return badTensor("data_offsets [" + std::to_string(b.integer) + ", " +
                       std::to_string(e.integer) + "] run past the " + std::to_string(dataSize) +
                       " data bytes: the file is truncated");
    t.size = size_t(e.integer - b.integer);
    if (elements * dtypeSize(t.dtype) != t.size)
      return badTensor(std::string(dtypeName(t.dtype)) + " " + shapeText(t.shape) + " needs " +
                       std::to_string(elements * dtypeSize(t.dtype)) + " bytes, data_offsets give " +
                       std::to_string(t.size));
    t.data = base + b.integer;
    spans.push_back({uint64_t(b.integer), uint64_t(e.integer), f.tensors_.size()});
    f.tensors_.push_back(std::move(t));
  }
  // The tensors must tile the data: no gap, no overlap, nothing after.
  std::sort(spans.begin(), spans.end(), [](const Span &a, const Span &b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t at = 0;
  for (const Span &s : spans) {
    const std::string &name = f.tensors_[s.index].name;
    if (s.begin < at)
      return bad("tensor '" + name + "' overlaps the tensor before it (data_offsets begin " +
                 std::to_string(s.begin) + " < " + std::to_string(at) + ")");
    if (s.begin > at)
      return bad("a gap of " + std::to_string(s.begin - at) + " bytes before tensor '" + name +
                 "': data_offsets must be contiguous");
    at = s.end;
  }
  if (at != dataSize)
    return bad(std::to_string(dataSize - at) + " bytes after the last tensor's data");
  // In data order, as the file holds them.
  std::vector<TensorView> ordered;
  for (const Span &s : spans)
    ordered.push_back(std::move(f.tensors_[s.index]));
  f.tensors_ = std::move(ordered);
  f.bytes_ = std::move(bytes);
  return f;
}

StatusOr<std::vector<uint8_t>> serialize(std::vector<TensorRef> tensors,
                                         const std::map<std::string, std::string> &metadata) {
  StatusOr<std::string> header = prepare(tensors, metadata);
  if (!header)
    return header.status();
  std::vector<uint8_t> out(8);
  for (int i = 0; i < 8; ++i)
    out[size_t(i)] = uint8_t(uint64_t(header->size()) >> (8 * i));
  out.insert(out.end(), header->begin(), header->end());
  for (const TensorRef &t : tensors) {
    const uint8_t *p = static_cast<const uint8_t *>(t.data);
    out.insert(out.end(), p, p + t.size);
  }
  return out;
}

Status write(const std::string &path, std::vector<TensorRef> tensors,
             const std::map<std::string, std::string> &metadata) {
  StatusOr<std::string> header = prepare(tensors, metadata);
  if (!header)
    return Status::error(path + ": " + header.status().message());
  return writeAtomically(path, [&](int fd) {
    uint8_t length[8];
    for (int i = 0; i < 8; ++i)
      length[i] = uint8_t(uint64_t(header->size()) >> (8 * i));
    if (Status s = writeAll(fd, length, 8); !s)
      return s;
    if (Status s = writeAll(fd, header->data(), header->size()); !s)
      return s;
    for (const TensorRef &t : tensors)
      if (Status s = writeAll(fd, t.data, t.size); !s)
        return s;
    return Status::ok();
  });
}

} // namespace gptc::safetensors
