//===- GptrunTest.cpp - gptrun end to end on a fake Host executable -------===//
//
// Builds a step.fb whose init/train_step/forward are the fake kernels of
// TestKernels.c (host_object), plus llm.c token files, then runs the real
// gptrun binary (GPTC_GPTRUN) and checks its output and exit status: the
// training loop's plumbing on CI, without a GPU or a compiled model.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/TokenFile.h"
#include "runtime/device/Device.h"
#include "test/unit/runtime/ExecutableBuilder.h"
#include "test/unit/runtime/RunTool.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <regex>

#include <chrono>
#include <csignal>
#include <sstream>
#include <fcntl.h>
#include <spawn.h>
#include <thread>
#include <unistd.h>

extern char **environ;

using namespace gptc;
using namespace gptc::testing;

namespace {

namespace fs = std::filesystem;

ToolResult gptrun(const std::string &args) { return runTool(GPTC_GPTRUN, args); }

/// The fake model: accum_steps=2, B=2, T=4, one parameter vector w (4).
/// Leave out a program by name with `without`; another n_layer makes
/// another model (for checkpoints).
ExecutableSpec fakeExecutable(const std::string &without = "", int64_t nLayer = 1,
                              const std::string &stepKernel = "gptc_fake_step") {
  ExecutableSpec e;
  e.modelName = "fake";
  e.numParameters = 4;
  e.config = {{"n_layer", nLayer}, {"n_embd", 4}, {"vocab_size", 16},
              {"batch", 2},   {"seq", 4},    {"accum_steps", 2}};
  e.hostObject = readFileBytes(GPTC_TEST_KERNELS_SO);
  uint32_t params = e.addPool("params", 256), state = e.addPool("state", 256);
  uint32_t inputs = e.addPool("inputs", 1024), outputs = e.addPool("outputs", 256);
  using R = s::TensorRole;
  using D = s::DType;
  uint32_t w = e.addTensor("w", R::Parameter, D::F32, {4}, params, 0);
  uint32_t m = e.addTensor("w.adam_m", R::OptimizerState, D::F32, {4}, state, 0);
  uint32_t seed = e.addTensor("seed", R::Input, D::I32, {}, inputs, 0);
  uint32_t step = e.addTensor("step", R::Input, D::I32, {}, inputs, 128);
  uint32_t tokens = e.addTensor("tokens", R::Input, D::I32, {2, 2, 4}, inputs, 256);
  uint32_t targets = e.addTensor("targets", R::Input, D::I32, {2, 2, 4}, inputs, 512);
  uint32_t vtokens = e.addTensor("tokens", R::Input, D::I32, {2, 4}, inputs, 768);
  uint32_t vtargets = e.addTensor("targets", R::Input, D::I32, {2, 4}, inputs, 896);
  uint32_t loss = e.addTensor("loss", R::Output, D::F32, {}, outputs, 0);
  uint32_t norm = e.addTensor("grad_norm", R::Output, D::F32, {}, outputs, 16);
  uint32_t lr = e.addTensor("lr", R::Output, D::F32, {}, outputs, 32);
  uint32_t vloss = e.addTensor("loss", R::Output, D::F32, {}, outputs, 64);
  uint32_t init = e.addKernel("gptc_fake_init", 3);
  uint32_t train = e.addKernel(stepKernel, 8);
  uint32_t fwd = e.addKernel("gptc_fake_forward", 3);
  if (without != "init")
    e.addProgram("init", {seed}, {w}).launch(init, {tensorArg(w), intArg(4), tensorArg(seed)});
  if (without != "train_step")
    e.addProgram("train_step", {w, m, tokens, targets, step}, {w, m, loss, norm, lr})
        .launch(train, {tensorArg(targets), intArg(16), tensorArg(step), tensorArg(w), tensorArg(m),
                        tensorArg(loss), tensorArg(norm), tensorArg(lr)});
  if (without != "forward")
    e.addProgram("forward", {w, vtokens, vtargets}, {vloss})
        .launch(fwd, {tensorArg(vtargets), intArg(8), tensorArg(vloss)});
  return e;
}

class GptrunTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    dir = new fs::path(fs::temp_directory_path() / ("gptrun-test-" + std::to_string(::getpid())));
    fs::create_directories(*dir);
    write("fake.fb", fakeExecutable().build());
    write("no-forward.fb", fakeExecutable("forward").build());
    write("no-init.fb", fakeExecutable("init").build());
    write("fake-2layer.fb", fakeExecutable("", 2).build());
    write("fake-nan.fb", fakeExecutable("", 1, "gptc_fake_step_nan").build());
    write("fake-poison.fb", fakeExecutable("", 1, "gptc_fake_step_poison").build());
    ExecutableSpec scaled = fakeExecutable("", 1, "gptc_fake_step_nan");
    scaled.optimizer = {{"lr", 3e-4}, {"loss_scale", 65536.0}};
    write("fake-nan-scaled.fb", scaled.build());
    // The same model for the GPU: cubins of DeviceKernels.cu, no host_object.
    ExecutableSpec cuda = fakeExecutable();
    cuda.target = s::TargetKind::CUDA;
    cuda.arch = "sm_90";
    cuda.hostObject.clear();
    for (auto &k : cuda.kernels)
      k.cubin = readFileBytes(GPTC_TEST_CUBIN);
    write("fake-cuda.fb", cuda.build());
    // Token i is i % 16: every window pair's targets average 7.5, and a
    // (B, T) = (2, 4) validation batch's 4.5 or 10.5.
    std::vector<int32_t> tokens(200);
    for (size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = int32_t(i % 16);
    ASSERT_TRUE(data::writeTokenFile(path("train.bin"), tokens));
    ASSERT_TRUE(data::writeTokenFile(path("val.bin"), tokens));
  }
  static void TearDownTestSuite() {
    if (!std::getenv("GPTC_KEEP_TEST_DIR"))
      fs::remove_all(*dir);
    delete dir;
  }
  static void write(const std::string &name, const std::vector<uint8_t> &bytes) {
    std::ofstream(path(name), std::ios::binary)
        .write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(bytes.size()));
  }
  static std::string path(const std::string &name) { return (*dir / name).string(); }

  static fs::path *dir;
};

fs::path *GptrunTest::dir = nullptr;

// Verify the whole loop: init with the seed, the per-step line (loss =
// mean target + w[0] = 7.5 + seed; norm counts steps in the zeroed state;
// lr = 1e-4 (step + 1)), validation every K steps and after the last.
TEST_F(GptrunTest, TrainsAndValidatesTheFakeModel) {
  ToolResult r = gptrun(path("fake.fb") + " --data " + path("train.bin") + " --val " +
                       path("val.bin") + " --steps 3 --val-every 2 --val-batches 2 --seed 5");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("model fake, 4 parameters, accum_steps=2 B=2 T=4 (16 tokens/step)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("target host on host; pools: params 256 B, state 256 B, inputs "
                          "1.0 KiB, outputs 256 B; total 1.8 KiB"),
            std::string::npos)
      << r.output;
  for (int step = 1; step <= 3; ++step) {
    std::regex line("step " + std::to_string(step) + "/3 \\| loss 12\\.5000 \\| norm " +
                    std::to_string(step) + "\\.0000 \\| lr " + std::to_string(step) +
                    "\\.00e-04 \\| [0-9]+\\.[0-9] ms \\| [0-9,]+ tok/s \\| mem 1\\.8 KiB\n");
    EXPECT_TRUE(std::regex_search(r.output, line)) << "step " << step << "\n" << r.output;
  }
  EXPECT_EQ(r.output.find("MFU"), std::string::npos) << "no MFU on the host";
  EXPECT_TRUE(std::regex_search(
      r.output, std::regex("val after step 2 \\| loss 7\\.5000 \\| 2 batches \\| [0-9.]+ ms\n")))
      << r.output;
  EXPECT_NE(r.output.find("val after step 3 | loss 7.5000"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("gptrun: steps 2-3: "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("each validation uses them all"), std::string::npos) << r.output;

  // More validation batches than the file has: said, not silently fewer.
  r = gptrun(path("fake.fb") + " --data " + path("train.bin") + " --val " + path("val.bin") +
             " --steps 1 --val-batches 1000");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(std::regex_search(
      r.output, std::regex("gptrun: --val-batches 1000: .*val\\.bin has [0-9]+, each validation "
                           "uses them all\n")))
      << r.output;
}

// Verify the errors that are the inputs' fault: exit 1 and a message
// naming the file or program.
TEST_F(GptrunTest, InputErrorsExitOne) {
  std::string data = " --data " + path("train.bin");
  ToolResult r = gptrun("/nonexistent/step.fb" + data);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "gptrun: error: /nonexistent/step.fb: cannot open\n");

  r = gptrun(path("fake.fb") + " --data " + path("fake.fb"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("gptrun: error: " + path("fake.fb")), std::string::npos) << r.output;

  r = gptrun(path("fake.fb") + " --data /nonexistent/train.bin");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("/nonexistent/train.bin"), std::string::npos) << r.output;

  // An endless executable (it was read until the allocation aborted).
  r = gptrun("/dev/zero" + data);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "gptrun: error: executable /dev/zero: is a device, not a file\n");

  r = gptrun(path("no-init.fb") + data);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("has no program 'init' (it has: train_step, forward)"), std::string::npos)
      << r.output;

  r = gptrun(path("no-forward.fb") + data + " --val " + path("val.bin"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("--val needs program 'forward'"), std::string::npos) << r.output;
  // --device picks a GPU: on a host executable it would be silently ignored.
  for (const char *sample : {"", " --sample Hello"}) {
    r = gptrun(path("fake.fb") + data + " --device 1" + sample);
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.output.find("--device applies to the CUDA target only (" + path("fake.fb") +
                            " is a host executable)"),
              std::string::npos)
        << r.output;
  }
}

// Verify that a file gptrun writes is never one it reads, by inode (a
// symlink does not hide it): the input would be destroyed.
TEST_F(GptrunTest, OutputThatIsAnInputIsRefused) {
  fs::remove(path("exe-link"));
  fs::create_symlink(path("fake.fb"), path("exe-link"));
  ToolResult r = gptrun(path("fake.fb") + " --sample hi --logits-out " + path("exe-link"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(r.output, "gptrun: error: --logits-out " + path("exe-link") + ": is the input " +
                          path("fake.fb") + " itself (same file); writing it would destroy the "
                          "input: choose another output\n");
  std::string logDir = path("log-over-data");
  fs::create_directories(logDir);
  fs::remove(logDir + "/log.jsonl");
  fs::create_hard_link(path("train.bin"), logDir + "/log.jsonl");
  auto before = fs::file_size(path("train.bin"));
  r = gptrun(path("fake.fb") + " --data " + path("train.bin") + " --steps 1 --log-dir " + logDir);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("--log-dir " + logDir + "/log.jsonl: is the input " + path("train.bin")),
            std::string::npos)
      << r.output;
  EXPECT_EQ(fs::file_size(path("train.bin")), before);
}

// Verify --target cuda: without a GPU a clear "no CUDA device"; with one,
// the Host executable's missing cubins are named.
TEST_F(GptrunTest, CudaTargetFailsClearly) {
  ToolResult r = gptrun(path("fake.fb") + " --data " + path("train.bin") + " --target cuda");
  EXPECT_EQ(r.status, 1);
  if (device::deviceCount())
    EXPECT_NE(r.output.find("kernel 'gptc_fake_init' has no cubin or PTX"), std::string::npos)
        << r.output;
  else
    EXPECT_NE(r.output.find("gptrun: error: " + path("fake.fb") + ": no CUDA device: "),
              std::string::npos)
        << r.output;
}

// Verify the CUDA path on a GPU, with and without CUDA graphs: the same
// numbers as on the host, and an MFU column for a GPU in the peak table.
TEST_F(GptrunTest, TrainsTheFakeModelOnTheGpu) {
  if (!device::deviceCount())
    GTEST_SKIP() << "no GPU on this machine";
  if (readFileBytes(GPTC_TEST_CUBIN).empty())
    GTEST_SKIP() << "no nvcc-built test kernels";
  for (const char *graph : {" --no-graph", ""}) {
    SCOPED_TRACE(graph);
    ToolResult r = gptrun(path("fake-cuda.fb") + " --data " + path("train.bin") + " --val " +
                         path("val.bin") + " --steps 3 --val-batches 2 --seed 5" + graph);
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_TRUE(std::regex_search(
        r.output, std::regex("step 3/3 \\| loss 12\\.5000 \\| norm 3\\.0000 \\| lr 3\\.00e-04 \\| "
                             "[0-9]+\\.[0-9] ms \\| [0-9,]+ tok/s( \\| MFU [0-9]+\\.[0-9]%)? \\| mem [0-9.]+ "
                             "[KMGT]iB\n")))
        << r.output;
    EXPECT_NE(r.output.find("val after step 3 | loss 7.5000 | 2 batches"), std::string::npos)
        << r.output;
    std::printf("%s", r.output.c_str());
  }
}

// Verify usage errors exit 2 and --help exits 0 with the formula.
TEST_F(GptrunTest, UsageAndHelp) {
  ToolResult r = gptrun(path("fake.fb") + " --data " + path("train.bin") + " --stepz 3");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.output, "gptrun: unknown option '--stepz' (see gptrun --help)\n");
  r = gptrun(path("fake.fb"));
  EXPECT_EQ(r.status, 2);
  r = gptrun("--help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.output.find("MFU = tok/s * (6*N_params + 12*n_layer*T*n_embd) / peak"),
            std::string::npos);
  EXPECT_NE(r.output.find("examples:"), std::string::npos);
}

} // namespace

/// The per-step lines of gptrun's output without "/N" and timings.
std::vector<std::string> stepLines(const std::string &output) {
  std::vector<std::string> lines;
  std::regex line("(step [0-9]+)/[0-9]+( \\| loss [0-9.]+ \\| norm [0-9.]+ \\| lr [0-9.e+-]+)");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line);
       it != std::sregex_iterator(); ++it)
    lines.push_back((*it)[1].str() + (*it)[2].str());
  return lines;
}

// Verify checkpoints through the CLI: --checkpoint-every with
// --keep-checkpoints leaves the newest K, and --resume latest continues
// with the optimizer state (norm counts steps in it) and the step (lr) of
// the uninterrupted run.
TEST_F(GptrunTest, CheckpointsAndResumes) {
  std::string ckpt = path("ckpt"), common = path("fake.fb") + " --data " + path("train.bin");
  fs::remove_all(ckpt);
  ToolResult straight = gptrun(common + " --steps 5");
  ASSERT_EQ(straight.status, 0) << straight.output;
  ToolResult first = gptrun(common + " --steps 3 --checkpoint-dir " + ckpt +
                            " --checkpoint-every 1 --keep-checkpoints 2");
  ASSERT_EQ(first.status, 0) << first.output;
  EXPECT_NE(first.output.find("gptrun: checkpoint " + ckpt + "/step-00000001.ckpt ("),
            std::string::npos)
      << first.output;
  std::vector<std::string> left;
  for (const auto &e : fs::directory_iterator(ckpt))
    left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"step-00000002.ckpt", "step-00000003.ckpt"}));

  ToolResult resumed = gptrun(common + " --steps 5 --checkpoint-dir " + ckpt + " --resume latest");
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("gptrun: resumed from " + ckpt +
                                "/step-00000003.ckpt at step 3 (data position 6)"),
            std::string::npos)
      << resumed.output;
  std::vector<std::string> all = stepLines(first.output), rest = stepLines(resumed.output);
  all.insert(all.end(), rest.begin(), rest.end());
  ASSERT_EQ(all.size(), 5u) << first.output << resumed.output;
  EXPECT_EQ(all, stepLines(straight.output)) << resumed.output;
  EXPECT_EQ(rest.front(), "step 4 | loss 1344.5000 | norm 4.0000 | lr 4.00e-04");
  EXPECT_EQ(resumed.output.find("warning"), std::string::npos) << resumed.output;

  // Other data: it goes on, saying it cannot repeat the uninterrupted run.
  std::string other = path("train-other.bin");
  {
    std::vector<int32_t> tokens(200);
    for (size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = int32_t(i % 16);
    tokens.back() = 0; // was 7
    ASSERT_TRUE(data::writeTokenFile(other, tokens));
  }
  ToolResult moved = gptrun(path("fake.fb") + " --data " + other + " --steps 5 --resume " + ckpt +
                            "/step-00000003.ckpt");
  ASSERT_EQ(moved.status, 0) << moved.output;
  EXPECT_NE(moved.output.find("gptrun: warning: --data " + other + " ("),
            std::string::npos)
      << moved.output;
  EXPECT_NE(moved.output.find("is not the data " + ckpt + "/step-00000003.ckpt was trained on"),
            std::string::npos)
      << moved.output;
}

// Verify that checkpoints of an earlier run are never lost: a fresh run
// into their directory is refused (it would overwrite step-N.ckpt files),
// and pruning after resuming from an earlier step keeps the checkpoint just
// written, leaving the later ones alone.
TEST_F(GptrunTest, CheckpointsOfAnEarlierRunSurvive) {
  std::string ckpt = path("ckpt-earlier"), common = path("fake.fb") + " --data " + path("train.bin");
  fs::remove_all(ckpt);
  ToolResult first = gptrun(common + " --steps 4 --checkpoint-dir " + ckpt + " --checkpoint-every 2");
  ASSERT_EQ(first.status, 0) << first.output;
  auto listing = [&] {
    std::vector<std::string> names;
    for (const auto &e : fs::directory_iterator(ckpt))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  };
  std::vector<std::string> written = {"step-00000002.ckpt", "step-00000004.ckpt"};
  ASSERT_EQ(listing(), written);
  auto before = fs::last_write_time(ckpt + "/step-00000002.ckpt");

  ToolResult fresh = gptrun(common + " --steps 2 --checkpoint-dir " + ckpt + " --keep-checkpoints 1");
  EXPECT_EQ(fresh.status, 1) << fresh.output;
  EXPECT_NE(fresh.output.find("gptrun: error: --checkpoint-dir " + ckpt +
                              " already holds 2 checkpoint(s) of an earlier run (newest: " + ckpt +
                              "/step-00000004.ckpt): continue it with --resume latest"),
            std::string::npos)
      << fresh.output;
  EXPECT_EQ(listing(), written);
  EXPECT_EQ(fs::last_write_time(ckpt + "/step-00000002.ckpt"), before);

  // From step 2 again, to step 3, keeping 1: step 3 is kept, step 4 left.
  ToolResult branch = gptrun(common + " --steps 3 --checkpoint-dir " + ckpt + " --resume " + ckpt +
                             "/step-00000002.ckpt --keep-checkpoints 1");
  ASSERT_EQ(branch.status, 0) << branch.output;
  EXPECT_EQ(listing(), (std::vector<std::string>{"step-00000003.ckpt", "step-00000004.ckpt"}));
}

// Verify the refusals: another model's checkpoint (naming both), a corrupt
// file, nothing to resume, a checkpoint already at --steps.
TEST_F(GptrunTest, ResumeRefusesBadCheckpoints) {
  std::string ckpt = path("ckpt-refuse"), data = " --data " + path("train.bin");
  fs::remove_all(ckpt);
  ToolResult r = gptrun(path("fake.fb") + data + " --steps 2 --checkpoint-dir " + ckpt);
  ASSERT_EQ(r.status, 0) << r.output;
  std::string file = ckpt + "/step-00000002.ckpt";

  r = gptrun(path("fake-2layer.fb") + data + " --steps 4 --resume " + file);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("gptrun: error: " + file + " is a checkpoint of model 'fake' ("
                          "n_layer=1, n_embd=4, vocab_size=16, batch=2, seq=4, accum_steps=2), "
                          "1 parameter and 1 state tensors, but the executable is model 'fake' ("
                          "n_layer=2, "),
            std::string::npos)
      << r.output;

  r = gptrun(path("fake.fb") + data + " --steps 2 --resume " + file);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("--resume: " + file + " is at step 2, not before --steps 2"),
            std::string::npos)
      << r.output;

  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put('\x7f');
  }
  r = gptrun(path("fake.fb") + data + " --steps 4 --resume " + file);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("gptrun: error: --resume: " + file + ": checksum mismatch"),
            std::string::npos)
      << r.output;

  fs::remove_all(ckpt);
  fs::create_directories(ckpt);
  r = gptrun(path("fake.fb") + data + " --steps 4 --checkpoint-dir " + ckpt + " --resume latest");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("--resume latest: " + ckpt + ": no checkpoint (step-N.ckpt)"),
            std::string::npos)
      << r.output;
}

namespace {

/// gptrun in the background, stdout and stderr to `log`; `env` is added
/// to the environment ("NAME=value" or "").
pid_t spawnGptrun(const std::string &args, const std::string &log, const std::string &env = "") {
  std::vector<std::string> argv = {GPTC_GPTRUN};
  std::istringstream in(args);
  for (std::string a; in >> a;)
    argv.push_back(a);
  std::vector<char *> cargv;
  for (std::string &a : argv)
    cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::vector<std::string> envs;
  for (char **e = environ; *e; ++e)
    envs.push_back(*e);
  if (!env.empty())
    envs.push_back(env);
  std::vector<char *> cenv;
  for (std::string &e : envs)
    cenv.push_back(e.data());
  cenv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  if (posix_spawn(&pid, cargv[0], &actions, nullptr, cargv.data(), cenv.data()) != 0)
    pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

std::string readText(const std::string &file) {
  std::ifstream in(file);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// Polls until `ready()` holds; false if it does not within a minute (a
/// bound for a hung child, not a timing assertion).
template <typename F> bool waitFor(F ready) {
  for (int i = 0; i < 6000; ++i) {
    if (ready())
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Verify SIGTERM and SIGINT mid-run: the step in flight finishes, a
// checkpoint of it is written, gptrun exits 0, and the checkpoint resumes.
TEST_F(GptrunTest, StopSignalCheckpointsAndExitsCleanly) {
  for (int sig : {SIGTERM, SIGINT}) {
    SCOPED_TRACE(sig);
    std::string ckpt = path("ckpt-signal"), log = path("signal.log");
    fs::remove_all(ckpt);
    std::string common = path("fake.fb") + " --data " + path("train.bin") +
                         " --checkpoint-dir " + ckpt + " --steps 1000000000";
    pid_t pid = spawnGptrun(common, log);
    ASSERT_GT(pid, 0);
    bool started = waitFor([&] { return readText(log).find("step 2/") != std::string::npos; });
    ::kill(pid, sig);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(started);
    std::string out = readText(log);
    ASSERT_TRUE(WIFEXITED(status)) << out.substr(out.size() > 2000 ? out.size() - 2000 : 0);
    EXPECT_EQ(WEXITSTATUS(status), 0);
    std::smatch m;
    std::string name = sig == SIGTERM ? "SIGTERM" : "SIGINT";
    ASSERT_TRUE(std::regex_search(
        out, m, std::regex("gptrun: checkpoint (.*/step-([0-9]+)\\.ckpt) \\(.*\\)\ngptrun: " + name +
                           ": stopped after step ([0-9]+) of 1000000000\n$")))
        << out.substr(out.size() > 2000 ? out.size() - 2000 : 0);
    EXPECT_EQ(std::stoll(m[2].str()), std::stoll(m[3].str()));
    ToolResult resumed = gptrun(path("fake.fb") + " --data " + path("train.bin") + " --steps " +
                                std::to_string(std::stoll(m[3].str()) + 1) + " --resume " +
                                m[1].str());
    EXPECT_EQ(resumed.status, 0) << resumed.output;
  }
}

// Verify kill -9 in the middle of a checkpoint write (the test hook stalls
// the writer after the first tensor of step 3's file): the temporary file
// is partial, step 2's checkpoint is intact and `--resume latest` uses it.
TEST_F(GptrunTest, KillDuringCheckpointWriteKeepsThePreviousOne) {
  std::string ckpt = path("ckpt-kill"), log = path("kill.log");
  fs::remove_all(ckpt);
  std::string common = path("fake.fb") + " --data " + path("train.bin") + " --checkpoint-dir " +
                       ckpt;
  pid_t pid = spawnGptrun(common + " --steps 5 --checkpoint-every 1", log,
                          "GPTC_TEST_STALL_CHECKPOINT=step-00000003.ckpt");
  ASSERT_GT(pid, 0);
  auto partial = [&] {
    std::error_code ec;
    for (const auto &e : fs::directory_iterator(ckpt, ec))
      if (e.path().filename().string().rfind("step-00000003.ckpt.tmp-", 0) == 0 &&
          fs::file_size(e.path(), ec) > 0)
        return true;
    return false;
  };
  bool stalled = waitFor(partial);
  ::kill(pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(stalled) << readText(log);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_FALSE(fs::exists(ckpt + "/step-00000003.ckpt"));
  ASSERT_TRUE(fs::exists(ckpt + "/step-00000002.ckpt"));

  ToolResult r = gptrun(common + " --steps 5 --resume latest");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("gptrun: resumed from " + ckpt + "/step-00000002.ckpt at step 2"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("step 3/5 | loss 1344.5000 | norm 3.0000"), std::string::npos)
      << r.output;
}

// Verify that a second run into a checkpoint or log directory a live run
// owns is refused, naming the holder (both used to exit 0, each having
// overwritten the other's checkpoints), and that once the holder is
// killed its lock is taken over and its partial temporary removed.
TEST_F(GptrunTest, SecondRunInALockedDirectoryIsRefused) {
  std::string ckpt = path("ckpt-lock"), logs = path("logs-lock"), log = path("lock.log");
  fs::remove_all(ckpt);
  fs::remove_all(logs);
  std::string common = path("fake.fb") + " --data " + path("train.bin") + " --checkpoint-dir " +
                       ckpt;
  pid_t pid = spawnGptrun(common + " --steps 5 --checkpoint-every 1 --log-dir " + logs, log,
                          "GPTC_TEST_STALL_CHECKPOINT=step-00000003.ckpt");
  ASSERT_GT(pid, 0);
  bool stalled = waitFor([&] {
    std::error_code ec;
    for (const auto &e : fs::directory_iterator(ckpt, ec))
      if (e.path().filename().string().rfind("step-00000003.ckpt.tmp-", 0) == 0)
        return true;
    return false;
  });
  ToolResult second = gptrun(common + " --steps 5 --resume latest");
  ToolResult secondLog =
      gptrun(path("fake.fb") + " --data " + path("train.bin") + " --steps 1 --log-dir " + logs +
             " --no-checkpoint");
  ::kill(pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(stalled) << readText(log);
  EXPECT_EQ(second.status, 1) << second.output;
  EXPECT_NE(second.output.find("gptrun: error: --checkpoint-dir " + ckpt +
                               " is in use by another run (pid " + std::to_string(pid) +
                               " on host "),
            std::string::npos)
      << second.output;
  EXPECT_EQ(secondLog.status, 1) << secondLog.output;
  EXPECT_NE(secondLog.output.find("gptrun: error: --log-dir " + logs +
                                  " is in use by another run (pid " + std::to_string(pid)),
            std::string::npos)
      << secondLog.output;

  ToolResult r = gptrun(common + " --steps 5 --resume latest");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("gptrun: " + ckpt + ": removed 1 temporary file(s) of interrupted "
                          "checkpoint writes"),
            std::string::npos)
      << r.output;
  for (const auto &e : fs::directory_iterator(ckpt))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
}

// Verify the log of two runs in one --log-dir: each starts with a
// "run_start" record, a torn last line of a killed run is cut off (the
// next record was glued to it, and gptplot refused the log), and gptplot
// draws the earlier run apart.
TEST_F(GptrunTest, LogDirSeparatesRunsAndRepairsATornLine) {
  std::string logs = path("logs-two-runs");
  fs::remove_all(logs);
  std::string run = path("fake.fb") + " --data " + path("train.bin") + " --steps 2 --log-dir " +
                    logs + " --no-checkpoint";
  ASSERT_EQ(gptrun(run).status, 0);
  std::ofstream(logs + "/log.jsonl", std::ios::app) << "{\"kind\":\"train\",\"st";
  ToolResult r = gptrun(run);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("gptrun: " + logs + "/log.jsonl: cut off a torn last line (19 bytes) "
                          "of a killed run\n"),
            std::string::npos)
      << r.output;
  std::ifstream in(logs + "/log.jsonl");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  ASSERT_EQ(lines.size(), 6u);
  for (size_t i : {0, 3}) {
    EXPECT_EQ(lines[i].rfind("{\"kind\":\"run_start\",\"resumed\":0,\"pid\":", 0), 0u) << lines[i];
  }
  for (const std::string &line : lines)
    EXPECT_EQ(std::count(line.begin(), line.end(), '{'), 1) << line;
  ToolResult plot = runTool(GPTC_GPTPLOT, logs + "/log.jsonl -o " + logs + "/loss.svg");
  EXPECT_EQ(plot.status, 0) << plot.output;
  EXPECT_NE(plot.output.find("2 train and 0 val points (and 1 earlier run of the log, dashed)"),
            std::string::npos)
      << plot.output;
}

// Verify --on-nan=stop (the default): exit 1 naming the step and the last
// good checkpoint; no checkpoint of the bad step is written.
TEST_F(GptrunTest, NonFiniteLossStops) {
  std::string ckpt = path("ckpt-nan");
  fs::remove_all(ckpt);
  ToolResult r = gptrun(path("fake-nan.fb") + " --data " + path("train.bin") +
                        " --steps 4 --checkpoint-every 1 --checkpoint-dir " + ckpt);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("gptrun: error: step 2: loss nan, grad norm 2: not finite; stopped "
                          "(--on-nan=stop), the last good checkpoint is " +
                          ckpt + "/step-00000001.ckpt\n"),
            std::string::npos)
      << r.output;
  std::vector<std::string> left;
  for (const auto &e : fs::directory_iterator(ckpt))
    left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"step-00000001.ckpt"});

  r = gptrun(path("fake-nan.fb") + " --data " + path("train.bin") + " --steps 4");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("stopped (--on-nan=stop), no checkpoint written"), std::string::npos)
      << r.output;
}

// Verify that a non-finite step of an executable compiled with a loss scale
// says so: with fp16 the likely cause is a scale too large.
TEST_F(GptrunTest, NonFiniteLossNamesTheLossScale) {
  ToolResult r = gptrun(path("fake-nan-scaled.fb") + " --data " + path("train.bin") + " --steps 4");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("gptrun: error: step 2: loss nan, grad norm 2: not finite (the "
                          "executable scales the loss by its --loss-scale; a lower scale keeps "
                          "the gradients finite); stopped (--on-nan=stop)"),
            std::string::npos)
      << r.output;
}

// Verify --on-nan=skip: the NaN step's update is undone (the optimizer
// state counts applied steps: norm 2 at step 3, not 3), training goes on.
TEST_F(GptrunTest, NonFiniteLossSkipsTheUpdate) {
  ToolResult r = gptrun(path("fake-nan.fb") + " --data " + path("train.bin") +
                        " --steps 4 --seed 5 --on-nan=skip");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("step 2/4 | loss nan | norm 2 | not finite: update skipped "
                          "(--on-nan=skip)\n"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("step 3/4 | loss 12.5000 | norm 2.0000 | lr 3.00e-04"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("step 4/4 | loss 12.5000 | norm 3.0000 | lr 4.00e-04"),
            std::string::npos)
      << r.output;
  r = gptrun(path("fake.fb") + " --data " + path("train.bin") + " --on-nan=maybe");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("--on-nan is stop or skip, got 'maybe'"), std::string::npos);
}

// Verify --on-nan=skip when a step's loss and norm are finite but its
// update is not (w[0] becomes inf at step 2): that update is undone too,
// so later steps train and the last checkpoint is finite and resumes (it
// used to skip every later step and write the inf, exit 0).
TEST_F(GptrunTest, NonFiniteUpdateIsSkippedAndNeverCheckpointed) {
  std::string ckpt = path("ckpt-poison-skip");
  fs::remove_all(ckpt);
  ToolResult r = gptrun(path("fake-poison.fb") + " --data " + path("train.bin") +
                        " --steps 4 --seed 5 --on-nan=skip --checkpoint-dir " + ckpt);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("step 2/4 | loss 12.5 | norm 2 | parameter 'w' holds a non-finite "
                          "value at element 0 (inf) after the update: update skipped "
                          "(--on-nan=skip)\n"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("step 3/4 | loss 12.5000 | norm 2.0000"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("step 4/4 | loss 12.5000 | norm 3.0000"), std::string::npos) << r.output;
  r = gptrun(path("fake.fb") + " --data " + path("train.bin") +
             " --steps 5 --resume latest --checkpoint-dir " + ckpt);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("step 5/5 | loss 12.5000 | norm 4.0000"), std::string::npos) << r.output;
}

// Verify --on-nan=stop when the update turns non-finite under a finite
// loss: the checkpoint of that step is refused and the message names the
// last one written, which resumes (it named the step-2 checkpoint, inf).
TEST_F(GptrunTest, NonFiniteUpdateStopsNamingAResumableCheckpoint) {
  std::string ckpt = path("ckpt-poison-stop");
  fs::remove_all(ckpt);
  ToolResult r = gptrun(path("fake-poison.fb") + " --data " + path("train.bin") +
                        " --steps 4 --seed 5 --checkpoint-every 1 --checkpoint-dir " + ckpt);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("gptrun: error: step 2: parameter 'w' holds a non-finite value at "
                          "element 0 (inf) after the update; " +
                          ckpt + "/step-00000002.ckpt is not written; stopped (--on-nan=stop), "
                          "the last good checkpoint is " + ckpt + "/step-00000001.ckpt\n"),
            std::string::npos)
      << r.output;
  std::vector<std::string> left;
  for (const auto &e : fs::directory_iterator(ckpt))
    left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"step-00000001.ckpt"});
  r = gptrun(path("fake.fb") + " --data " + path("train.bin") +
             " --steps 2 --resume latest --checkpoint-dir " + ckpt);
  EXPECT_EQ(r.status, 0) << r.output;
}

// Verify a checkpoint directory that cannot be written is refused before
// init and training (here: a path through a regular file).
TEST_F(GptrunTest, UnwritableCheckpointDirFailsBeforeTraining) {
  ToolResult r = gptrun(path("fake.fb") + " --data " + path("train.bin") + " --checkpoint-dir " +
                        path("train.bin") + "/ckpt");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("gptrun: error: --checkpoint-dir " + path("train.bin") + "/ckpt: "),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("step 1/"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("init in"), std::string::npos) << r.output;
}

// Verify a --log-dir that cannot be created (a path through a regular file)
// is refused before init and training, named as --log-dir even though the
// default checkpoint dir lies inside it.
TEST_F(GptrunTest, UncreatableLogDirFailsBeforeTraining) {
  ToolResult r = gptrun(path("fake.fb") + " --data " + path("train.bin") + " --log-dir " +
                        path("train.bin") + "/logs --checkpoint-every 1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("gptrun: error: --log-dir " + path("train.bin") + "/logs: "),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("step 1/"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("init in"), std::string::npos) << r.output;
}

// Verify a --log-dir whose log file cannot be opened for appending (here a
// directory in its place, which stops root too) is refused before training.
TEST_F(GptrunTest, UnopenableLogFileFailsBeforeTraining) {
  std::string logs = path("logs-blocked");
  fs::remove_all(logs);
  fs::create_directories(logs + "/log.jsonl");
  ToolResult r = gptrun(path("fake.fb") + " --data " + path("train.bin") + " --log-dir " + logs);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("gptrun: error: --log-dir " + logs + ": cannot open " + logs +
                          "/log.jsonl: Is a directory"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("init in"), std::string::npos) << r.output;
}

// Verify a read-only --log-dir is refused before training (root may write
// anywhere, so this needs an ordinary user).
TEST_F(GptrunTest, ReadOnlyLogDirFailsBeforeTraining) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "running as root: permissions do not stop writes";
  std::string logs = path("logs-read-only");
  fs::remove_all(logs);
  fs::create_directories(logs);
  fs::permissions(logs, fs::perms::owner_read | fs::perms::owner_exec);
  ToolResult r = gptrun(path("fake.fb") + " --data " + path("train.bin") + " --log-dir " + logs +
                        " --checkpoint-dir " + path("ckpt-read-only-log"));
  fs::permissions(logs, fs::perms::owner_all);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("gptrun: error: --log-dir " + logs + ": cannot open " + logs +
                          "/log.jsonl: Permission denied"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("init in"), std::string::npos) << r.output;
}

/// The lines of `file`.
std::vector<std::string> readLines(const std::string &file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

// Verify --log-dir: a JSONL and a CSV record per step and per validation,
// with the values the step lines show; a resumed run appends. Output to a
// pipe (as in CI) has no progress bar: plain lines, no carriage returns.
TEST_F(GptrunTest, WritesLogsAndPlainLinesWithoutATerminal) {
  std::string logs = path("logs");
  fs::remove_all(logs);
  std::string common = path("fake.fb") + " --data " + path("train.bin") + " --val " +
                       path("val.bin") + " --val-every 2 --val-batches 2 --seed 5 --log-dir " + logs;
  ToolResult r = gptrun(common + " --steps 3 --checkpoint-every 3");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find('\r'), std::string::npos) << "no progress bar into a pipe";
  EXPECT_EQ(r.output.find("ETA"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(logs + "/checkpoints/step-00000003.ckpt")) << "checkpoints under --log-dir";

  std::vector<std::string> json = readLines(logs + "/log.jsonl");
  ASSERT_EQ(json.size(), 6u); // run_start, steps 1, 2, val 2, step 3, val 3
  EXPECT_EQ(json[0].rfind("{\"kind\":\"run_start\",\"resumed\":0,\"pid\":", 0), 0u) << json[0];
  json.erase(json.begin());
  std::regex train("\\{\"kind\":\"train\",\"step\":1,\"loss\":12\\.5,\"grad_norm\":1,"
                   "\"lr\":9\\.99999975e-05,\"ms\":[0-9.e+-]+,\"tok_per_s\":[0-9.e+-]+,"
                   "\"memory_bytes\":1792\\}");
  EXPECT_TRUE(std::regex_match(json[0], train)) << json[0];
  EXPECT_TRUE(std::regex_match(
      json[2], std::regex("\\{\"kind\":\"val\",\"step\":2,\"loss\":7\\.5,\"ms\":[0-9.e+-]+\\}")))
      << json[2];
  EXPECT_NE(json[3].find("\"step\":3,\"loss\":12.5,\"grad_norm\":3,"), std::string::npos) << json[3];

  std::vector<std::string> csv = readLines(logs + "/log.csv");
  ASSERT_EQ(csv.size(), 7u);
  EXPECT_EQ(csv[0], "kind,step,loss,grad_norm,lr,ms,tok_per_s,mfu_percent,memory_bytes");
  EXPECT_EQ(csv[1], "run_start,,,,,,,,");
  csv.erase(csv.begin() + 1);
  EXPECT_TRUE(std::regex_match(csv[2], std::regex("train,2,12\\.5,2,0\\.000199999995,[0-9.e+-]+,"
                                                  "[0-9.e+-]+,,1792")))
      << csv[2];
  EXPECT_TRUE(std::regex_match(csv[3], std::regex("val,2,7\\.5,,,[0-9.e+-]+,,,"))) << csv[3];

  r = gptrun(common + " --steps 4 --resume latest");
  ASSERT_EQ(r.status, 0) << r.output;
  json = readLines(logs + "/log.jsonl");
  ASSERT_EQ(json.size(), 9u); // + run_start (resumed), step 4, val 4
  EXPECT_EQ(json[6].rfind("{\"kind\":\"run_start\",\"resumed\":1,", 0), 0u) << json[6];
  EXPECT_NE(json[7].find("\"step\":4,\"loss\":12.5,\"grad_norm\":4,"), std::string::npos)
      << json[7];
  EXPECT_EQ(readLines(logs + "/log.csv").size(), 10u) << "one header";
}

} // namespace
