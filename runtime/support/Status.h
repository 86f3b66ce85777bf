//===- Status.h - error values for the runtime ---------------------------===//
//
// The runtime reports errors as values: a Status with a message that names
// the file, flag or command at fault. Tools print it and exit non-zero.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_SUPPORT_STATUS_H
#define GPTC_RUNTIME_SUPPORT_STATUS_H

#include <optional>
#include <string>
#include <utility>

namespace gptc {

class [[nodiscard]] Status {
public:
  static Status ok() { return Status(); }
  static Status error(std::string message) { return Status(std::move(message)); }

  bool isOk() const { return !message_; }
  explicit operator bool() const { return isOk(); }
  const std::string &message() const { return *message_; }

private:
  Status() = default;
  explicit Status(std::string message) : message_(std::move(message)) {}
  std::optional<std::string> message_;
};

/// A value or the Status saying why there is none.
template <typename T>
class [[nodiscard]] StatusOr {
public:
  StatusOr(T value) : value_(std::move(value)), status_(Status::ok()) {}
  StatusOr(Status status) : status_(std::move(status)) {}

  bool isOk() const { return status_.isOk(); }
  explicit operator bool() const { return isOk(); }
  const Status &status() const { return status_; }
  T &operator*() { return *value_; }
  const T &operator*() const { return *value_; }
  T *operator->() { return &*value_; }
  const T *operator->() const { return &*value_; }

private:
  std::optional<T> value_;
  Status status_;
};

} // namespace gptc

#endif // GPTC_RUNTIME_SUPPORT_STATUS_H
