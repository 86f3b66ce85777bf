//===- Bootstrap.cpp - how the ranks of a multi-process run find each other ===//
//
// The id exchange, one TCP connection per peer rank:
//   peer -> rank 0:  "GPTC", world size (u32), rank (u32)
//   rank 0 -> peer:  "GPTC", verdict (u8: 0 ok, 1 other world size,
//                    2 bad or repeated rank), id length (u32), id bytes
// Integers are big-endian.
//
//===----------------------------------------------------------------------===//

#include "runtime/collective/Bootstrap.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <set>
#include <thread>

namespace gptc::bootstrap {

namespace {

StatusOr<int64_t> parseInt(const char *name, const char *text, int64_t min, int64_t max) {
  errno = 0;
  char *end = nullptr;
  long long v = std::strtoll(text, &end, 10);
  if (!*text || *end || errno == ERANGE || v < min || v > max)
    return Status::error(std::string(name) + "='" + text + "' is not an integer in [" +
                         std::to_string(min) + ", " + std::to_string(max) + "]");
  return int64_t(v);
}

struct Names {
  const char *launcher, *rank, *size, *local;
};
constexpr Names kLaunchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
};

std::string errnoText(int err) { return std::strerror(err); }

using Clock = std::chrono::steady_clock;

int millisLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() > 0 ? int(left.count()) : 0;
}

/// Closes the socket when it goes out of scope.
struct Socket {
  int fd = -1;
  explicit Socket(int f) : fd(f) {}
  Socket(const Socket &) = delete;
  Socket &operator=(const Socket &) = delete;
  ~Socket() {
    if (fd >= 0)
      ::close(fd);
  }
};

/// Waits for `events` on `fd` until the deadline; false on timeout.
StatusOr<bool> waitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, millisLeft(deadline));
    if (n > 0)
      return true;
    if (n == 0)
      return false;
    if (errno != EINTR)
      return Status::error("poll: " + errnoText(errno));
  }
}

Status sendAll(int fd, const void *data, size_t size, Clock::time_point deadline) {
  const char *p = static_cast<const char *>(data);
  while (size > 0) {
    StatusOr<bool> ready = waitFor(fd, POLLOUT, deadline);
    if (!ready)
      return ready.status();
    if (!*ready)
      return Status::error("timed out sending");
    ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return Status::error("send: " + errnoText(errno));
    p += n;
    size -= size_t(n);
  }
  return Status::ok();
}

Status recvAll(int fd, void *data, size_t size, Clock::time_point deadline) {
  char *p = static_cast<char *>(data);
  while (size > 0) {
    StatusOr<bool> ready = waitFor(fd, POLLIN, deadline);
    if (!ready)
      return ready.status();
    if (!*ready)
      return Status::error("timed out receiving");
    ssize_t n = ::recv(fd, p, size, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return Status::error("recv: " + errnoText(errno));
    if (n == 0)
      return Status::error("the other side closed the connection");
    p += n;
    size -= size_t(n);
  }
  return Status::ok();
}

constexpr char kMagic[4] = {'G', 'P', 'T', 'C'};
enum Verdict : uint8_t { kOk = 0, kOtherWorld = 1, kBadRank = 2 };

void putU32(std::vector<uint8_t> &out, uint32_t v) {
  uint32_t be = htonl(v);
  const auto *b = reinterpret_cast<const uint8_t *>(&be);
  out.insert(out.end(), b, b + 4);
}
uint32_t getU32(const uint8_t *p) {
  uint32_t be;
  std::memcpy(&be, p, 4);
  return ntohl(be);
}

} // namespace

StatusOr<std::optional<LaunchEnv>> readLaunchEnv(const GetEnv &getenv) {
  for (const Names &n : kLaunchers) {
    const char *rank = getenv(n.rank), *size = getenv(n.size), *local = getenv(n.local);
    if (!rank && !size)
      continue;
    LaunchEnv env;
    env.launcher = n.launcher;
    for (const char *missing : {n.rank, n.size, n.local})
      if (!getenv(missing))
        return Status::error(std::string(missing) + " is not set, but " +
                             (rank ? n.rank : n.size) + " is (" + n.launcher + " sets " + n.rank +
                             ", " + n.size + " and " + n.local + ")");
    StatusOr<int64_t> w = parseInt(n.size, size, 1, 1 << 20);
    if (!w)
      return w.status();
    StatusOr<int64_t> r = parseInt(n.rank, rank, 0, *w - 1);
    if (!r)
      return Status::error(r.status().message() + " (" + n.size + "=" + size + ")");
    StatusOr<int64_t> l = parseInt(n.local, local, 0, *w - 1);
    if (!l)
      return l.status();
    env.rank = int(*r);
    env.worldSize = int(*w);
    env.localRank = int(*l);
    const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
    if (!addr || !*addr || !port)
      return Status::error(std::string("MASTER_ADDR and MASTER_PORT must be set under ") +
                           n.launcher + ": rank 0 serves the communicator id on MASTER_PORT+1 "
                           "of MASTER_ADDR (the host of rank 0)");
    StatusOr<int64_t> p = parseInt("MASTER_PORT", port, 1, 65534);
    if (!p)
      return p.status();
    env.masterAddr = addr;
    env.masterPort = int(*p);
    if (const char *t = getenv("GPTC_BOOTSTRAP_TIMEOUT")) {
      char *end = nullptr;
      double v = std::strtod(t, &end);
      if (!*t || *end || !(v > 0))
        return Status::error(std::string("GPTC_BOOTSTRAP_TIMEOUT='") + t +
                             "' is not a positive number of seconds");
      env.timeoutSeconds = v;
    }
    return std::optional<LaunchEnv>(env);
  }
  return std::optional<LaunchEnv>();
}

StatusOr<std::optional<LaunchEnv>> readLaunchEnv() {
  return readLaunchEnv([](const char *name) -> const char * { return std::getenv(name); });
}

Status serveId(const std::vector<uint8_t> &id, int port, int worldSize, double timeoutSeconds) {
  const std::string where = "serving the communicator id on port " + std::to_string(port);
  auto fail = [&](const std::string &why) { return Status::error(where + ": " + why); };
  Socket listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (listener.fd < 0)
    return fail("socket: " + errnoText(errno));
  int one = 1;
  ::setsockopt(listener.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(uint16_t(port));
  if (::bind(listener.fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) != 0)
    return fail("bind: " + errnoText(errno) + " (is another run using MASTER_PORT+1?)");
  if (::listen(listener.fd, 128) != 0)
    return fail("listen: " + errnoText(errno));
  auto deadline = Clock::now() + std::chrono::milliseconds(int64_t(timeoutSeconds * 1000));
  std::set<uint32_t> served;
  while (int(served.size()) < worldSize - 1) {
    StatusOr<bool> ready = waitFor(listener.fd, POLLIN, deadline);
    if (!ready)
      return fail(ready.status().message());
    if (!*ready)
      return fail("timed out after " + std::to_string(int(timeoutSeconds)) + " s with " +
                  std::to_string(served.size()) + " of " + std::to_string(worldSize - 1) +
                  " other ranks served (did every rank start, with the same MASTER_ADDR?)");
    Socket peer(::accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC));
    if (peer.fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED)
        continue;
      return fail("accept: " + errnoText(errno));
    }
    uint8_t hello[12];
    if (Status s = recvAll(peer.fd, hello, sizeof(hello), deadline); !s)
      continue; // not one of ours, or gone: keep waiting for the ranks
    if (std::memcmp(hello, kMagic, 4) != 0)
      continue;
    uint32_t peerWorld = getU32(hello + 4), peerRank = getU32(hello + 8);
    Verdict verdict = kOk;
    if (int64_t(peerWorld) != worldSize)
      verdict = kOtherWorld;
    else if (peerRank == 0 || int64_t(peerRank) >= worldSize || served.count(peerRank))
      verdict = kBadRank;
    std::vector<uint8_t> reply(kMagic, kMagic + 4);
    reply.push_back(verdict);
    putU32(reply, verdict == kOk ? uint32_t(id.size()) : 0);
    if (verdict == kOk)
      reply.insert(reply.end(), id.begin(), id.end());
    Status sent = sendAll(peer.fd, reply.data(), reply.size(), deadline);
    if (verdict == kOtherWorld)
      return fail("rank " + std::to_string(peerRank) + " has world size " +
                  std::to_string(peerWorld) + ", this one " + std::to_string(worldSize));
    if (verdict == kBadRank)
      return fail("a peer claims rank " + std::to_string(peerRank) + ", which is " +
                  (served.count(peerRank) ? "taken already" : "out of range") +
                  " (are two runs sharing MASTER_PORT?)");
    if (sent)
      served.insert(peerRank);
  }
  return Status::ok();
}

StatusOr<std::vector<uint8_t>> fetchId(const std::string &host, int port, int rank, int worldSize,
                                       double timeoutSeconds) {
  const std::string where = "rank " + std::to_string(rank) + " fetching the communicator id from " +
                            host + ":" + std::to_string(port);
  auto fail = [&](const std::string &why) { return Status::error(where + ": " + why); };
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo *found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0)
    return fail(std::string("cannot resolve MASTER_ADDR: ") + ::gai_strerror(rc));
  sockaddr_in addr;
  std::memcpy(&addr, found->ai_addr, sizeof(addr));
  ::freeaddrinfo(found);

  auto deadline = Clock::now() + std::chrono::milliseconds(int64_t(timeoutSeconds * 1000));
  std::string lastError = "no attempt";
  for (;;) {
    if (millisLeft(deadline) == 0)
      return fail("timed out after " + std::to_string(int(timeoutSeconds)) +
                  " s; last attempt: " + lastError + " (is rank 0 running?)");
    Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (s.fd < 0)
      return fail("socket: " + errnoText(errno));
    int rc = ::connect(s.fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr));
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      // At most a second per attempt, so that a refused one is retried.
      auto attempt = std::min(deadline, Clock::now() + std::chrono::seconds(1));
      StatusOr<bool> ready = waitFor(s.fd, POLLOUT, attempt);
      if (!ready)
        return fail(ready.status().message());
      socklen_t len = sizeof(err);
      if (!*ready)
        err = ETIMEDOUT;
      else if (::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    }
    if (err != 0) {
      lastError = "connect: " + errnoText(err);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    std::vector<uint8_t> hello(kMagic, kMagic + 4);
    putU32(hello, uint32_t(worldSize));
    putU32(hello, uint32_t(rank));
    if (Status st = sendAll(s.fd, hello.data(), hello.size(), deadline); !st)
      return fail(st.message());
    uint8_t head[9];
    if (Status st = recvAll(s.fd, head, sizeof(head), deadline); !st)
      return fail(st.message());
    if (std::memcmp(head, kMagic, 4) != 0)
      return fail("the server is not a gptrun rank 0 (wrong MASTER_ADDR or MASTER_PORT?)");
    if (head[4] == kOtherWorld)
      return fail("rank 0 runs another world size than " + std::to_string(worldSize));
    if (head[4] != kOk)
      return fail("rank 0 refused rank " + std::to_string(rank) + " (taken or out of range)");
    uint32_t size = getU32(head + 5);
    if (size > (1u << 20))
      return fail("rank 0 announced an id of " + std::to_string(size) + " bytes");
    std::vector<uint8_t> id(size);
    if (Status st = recvAll(s.fd, id.data(), id.size(), deadline); !st)
      return fail(st.message());
    return id;
  }
}

} // namespace gptc::bootstrap
