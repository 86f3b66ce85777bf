//===- BootstrapTest.cpp - launcher environments and the TCP id exchange --===//

#include "runtime/collective/Bootstrap.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <map>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

using namespace gptc;
using namespace gptc::bootstrap;

namespace {

/// An environment made of `vars` only.
GetEnv envOf(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char *name) -> const char * {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

std::string errorOf(const StatusOr<std::optional<LaunchEnv>> &r) {
  return r ? std::string("(no error)") : r.status().message();
}

/// A port that was free a moment ago (the kernel picks it).
int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a));
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

TEST(LaunchEnvTest, NoLauncherMeansNone) {
  auto env = readLaunchEnv(envOf({{"MASTER_ADDR", "x"}, {"HOME", "/root"}}));
  ASSERT_TRUE(env) << env.status().message();
  EXPECT_FALSE(env->has_value());
}

TEST(LaunchEnvTest, Torchrun) {
  auto env = readLaunchEnv(envOf({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"},
                                  {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"}}));
  ASSERT_TRUE(env) << env.status().message();
  ASSERT_TRUE(env->has_value());
  const LaunchEnv &e = **env;
  EXPECT_EQ(e.launcher, "torchrun");
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.worldSize, 8);
  EXPECT_EQ(e.localRank, 1);
  EXPECT_EQ(e.masterAddr, "node0");
  EXPECT_EQ(e.idPort(), 29501);
  EXPECT_EQ(e.timeoutSeconds, 120);
}

TEST(LaunchEnvTest, SlurmAndOpenMpi) {
  auto slurm = readLaunchEnv(envOf({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"},
                                    {"SLURM_LOCALID", "2"}, {"MASTER_ADDR", "n1"},
                                    {"MASTER_PORT", "1234"}, {"GPTC_BOOTSTRAP_TIMEOUT", "7.5"}}));
  ASSERT_TRUE(slurm && slurm->has_value()) << errorOf(slurm);
  EXPECT_EQ((*slurm)->launcher, "Slurm");
  EXPECT_EQ((*slurm)->rank, 5);
  EXPECT_EQ((*slurm)->worldSize, 6);
  EXPECT_EQ((*slurm)->localRank, 2);
  EXPECT_EQ((*slurm)->timeoutSeconds, 7.5);
  auto mpi = readLaunchEnv(envOf({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"},
                                  {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"MASTER_ADDR", "n1"},
                                  {"MASTER_PORT", "1234"}}));
  ASSERT_TRUE(mpi && mpi->has_value()) << errorOf(mpi);
  EXPECT_EQ((*mpi)->launcher, "Open MPI");
  EXPECT_EQ((*mpi)->worldSize, 2);
}

TEST(LaunchEnvTest, TorchrunWinsOverSlurm) {
  // torchrun started inside an srun step: its per-process variables count.
  auto env = readLaunchEnv(envOf({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"},
                                  {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"},
                                  {"SLURM_LOCALID", "0"}, {"MASTER_ADDR", "a"},
                                  {"MASTER_PORT", "80"}}));
  ASSERT_TRUE(env && env->has_value()) << errorOf(env);
  EXPECT_EQ((*env)->launcher, "torchrun");
  EXPECT_EQ((*env)->worldSize, 4);
}

TEST(LaunchEnvTest, BadValuesNameTheVariable) {
  std::map<std::string, std::string> good = {{"RANK", "0"}, {"WORLD_SIZE", "2"},
                                             {"LOCAL_RANK", "0"}, {"MASTER_ADDR", "h"},
                                             {"MASTER_PORT", "29500"}};
  auto with = [&](const std::string &key, const char *value) {
    auto vars = good;
    if (value)
      vars[key] = value;
    else
      vars.erase(key);
    return errorOf(readLaunchEnv(envOf(vars)));
  };
  EXPECT_NE(with("RANK", "2").find("RANK='2' is not an integer in [0, 1] (WORLD_SIZE=2)"),
            std::string::npos);
  EXPECT_NE(with("WORLD_SIZE", "two").find("WORLD_SIZE='two'"), std::string::npos);
  EXPECT_NE(with("WORLD_SIZE", "0").find("WORLD_SIZE='0'"), std::string::npos);
  EXPECT_NE(with("LOCAL_RANK", "-1").find("LOCAL_RANK='-1'"), std::string::npos);
  EXPECT_NE(with("LOCAL_RANK", nullptr).find("LOCAL_RANK is not set, but RANK is"),
            std::string::npos);
  EXPECT_NE(with("MASTER_ADDR", nullptr).find("MASTER_ADDR and MASTER_PORT must be set under "
                                              "torchrun"),
            std::string::npos);
  EXPECT_NE(with("MASTER_PORT", "65535").find("MASTER_PORT='65535'"), std::string::npos);
  EXPECT_NE(with("MASTER_PORT", "").find("MASTER_PORT=''"), std::string::npos);
  auto vars = good;
  vars["GPTC_BOOTSTRAP_TIMEOUT"] = "soon";
  EXPECT_NE(errorOf(readLaunchEnv(envOf(vars))).find("GPTC_BOOTSTRAP_TIMEOUT='soon'"),
            std::string::npos);
}

TEST(IdExchangeTest, EveryRankReceivesTheId) {
  constexpr int kWorld = 4;
  const int port = freePort();
  std::vector<uint8_t> id(128);
  for (size_t i = 0; i < id.size(); ++i)
    id[i] = uint8_t(i * 7 + 3);
  std::vector<std::vector<uint8_t>> got(kWorld);
  std::vector<std::string> errors(kWorld);
  std::vector<std::thread> threads;
  // The peers start first: they must retry until rank 0 listens.
  for (int r = 1; r < kWorld; ++r)
    threads.emplace_back([&, r] {
      auto fetched = fetchId("localhost", port, r, kWorld, 20);
      if (fetched)
        got[r] = *fetched;
      else
        errors[r] = fetched.status().message();
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  Status served = serveId(id, port, kWorld, 20);
  for (std::thread &t : threads)
    t.join();
  ASSERT_TRUE(served) << served.message();
  for (int r = 1; r < kWorld; ++r) {
    EXPECT_TRUE(errors[r].empty()) << "rank " << r << ": " << errors[r];
    EXPECT_EQ(got[r], id) << "rank " << r;
  }
}

TEST(IdExchangeTest, PeerTimesOutWithoutRankZero) {
  auto fetched = fetchId("127.0.0.1", freePort(), 1, 2, 0.5);
  ASSERT_FALSE(fetched);
  EXPECT_NE(fetched.status().message().find("rank 1 fetching the communicator id from 127.0.0.1:"),
            std::string::npos)
      << fetched.status().message();
  EXPECT_NE(fetched.status().message().find("timed out"), std::string::npos);
  EXPECT_NE(fetched.status().message().find("is rank 0 running?"), std::string::npos);
}

TEST(IdExchangeTest, RankZeroTimesOutWithoutPeers) {
  Status s = serveId(std::vector<uint8_t>(128, 1), freePort(), 3, 0.3);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("0 of 2 other ranks served"), std::string::npos) << s.message();
}

TEST(IdExchangeTest, OtherWorldSizeFailsBothSides) {
  const int port = freePort();
  std::string peerError;
  std::thread peer([&] {
    auto fetched = fetchId("localhost", port, 1, 3, 10);
    peerError = fetched ? "(no error)" : fetched.status().message();
  });
  Status s = serveId(std::vector<uint8_t>(128, 1), port, 2, 10);
  peer.join();
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("rank 1 has world size 3, this one 2"), std::string::npos)
      << s.message();
  EXPECT_NE(peerError.find("rank 0 runs another world size than 3"), std::string::npos)
      << peerError;
}

TEST(IdExchangeTest, UnresolvableHostIsNamed) {
  auto fetched = fetchId("no-such-host.invalid", 1, 1, 2, 1);
  ASSERT_FALSE(fetched);
  EXPECT_NE(fetched.status().message().find("cannot resolve MASTER_ADDR"), std::string::npos)
      << fetched.status().message();
}

} // namespace
