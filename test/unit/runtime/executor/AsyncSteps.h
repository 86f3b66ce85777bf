//===- AsyncSteps.h - the asynchronous queue, shared by both backends -----===//
//
// Runs the pipeline program of TestPrograms.h as a step loop without host
// syncs: step s+1's input x is copied from a pinned buffer and launched
// before step s's output xs is waited for, with two input and two output
// buffers. Every step must read back its own result.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TEST_UNIT_RUNTIME_EXECUTOR_ASYNCSTEPS_H
#define GPTC_TEST_UNIT_RUNTIME_EXECUTOR_ASYNCSTEPS_H

#include "runtime/executor/Session.h"
#include "test/unit/runtime/executor/TestPrograms.h"

#include <gtest/gtest.h>

namespace gptc::testing {

inline void checkAsyncSteps(Session &session, int steps = 6) {
  PipelineValues v;
  for (auto [name, data] : {std::pair{"x", &v.x}, std::pair{"a", &v.a}, std::pair{"b", &v.b}})
    ASSERT_TRUE(session.setInput("main", name, *data));
  ASSERT_TRUE(session.writeTensor(*session.findTensor("bias"), v.bias.data(), 8));
  Backend &backend = session.backend();
  const schema::Program *main = *session.program("main");
  uint32_t x = *session.findTensor("x", "main"), xs = *session.findTensor("xs", "main");
  float *in[2], *out[2];
  for (float **buffers : {in, out})
    for (int i = 0; i < 2; ++i) {
      StatusOr<void *> p = backend.allocateHost(32);
      ASSERT_TRUE(p) << p.status().message();
      buffers[i] = static_cast<float *>(*p);
    }
  // Step s scales x = (s + 1) * [1..8] by 0.5 into xs, between two fences.
  std::vector<Backend::Fence> starts, fences;
  auto enqueue = [&](int s) {
    StatusOr<Backend::Fence> start = backend.recordFence();
    ASSERT_TRUE(start) << start.status().message();
    starts.push_back(*start);
    for (int i = 0; i < 8; ++i)
      in[s % 2][i] = float((s + 1) * (i + 1));
    ASSERT_TRUE(backend.writeAsync(x, in[s % 2]));
    ASSERT_TRUE(backend.launch(*main));
    ASSERT_TRUE(backend.readAsync(xs, out[s % 2]));
    StatusOr<Backend::Fence> f = backend.recordFence();
    ASSERT_TRUE(f) << f.status().message();
    fences.push_back(*f);
  };
  enqueue(0);
  for (int s = 0; s < steps; ++s) {
    if (s + 1 < steps)
      enqueue(s + 1);
    StatusOr<double> seconds = backend.waitFenceTimed(starts[s], fences[s]);
    ASSERT_TRUE(seconds) << seconds.status().message();
    EXPECT_GE(*seconds, 0.0) << "step " << s;
    EXPECT_LT(*seconds, 60.0) << "step " << s;
    for (int i = 0; i < 8; ++i)
      EXPECT_EQ(out[s % 2][i], 0.5f * float((s + 1) * (i + 1))) << "step " << s << " element " << i;
  }
  // The other outputs of the last step, through the synchronous path.
  std::vector<float> y(4);
  ASSERT_TRUE(session.getOutput("main", "y", y.data(), 16));
  EXPECT_EQ(y, v.y());
  // Waiting again for a passed fence is fine; for one never recorded not.
  EXPECT_TRUE(backend.waitFence(fences[0]));
  EXPECT_FALSE(backend.waitFence(fences.back() + 100));
  // A timed wait needs an earlier fence that no wait has passed.
  StatusOr<Backend::Fence> a = backend.recordFence();
  ASSERT_TRUE(a);
  ASSERT_TRUE(backend.launch(*main));
  StatusOr<Backend::Fence> b = backend.recordFence();
  ASSERT_TRUE(b);
  StatusOr<double> reversed = backend.waitFenceTimed(*b, *a);
  ASSERT_FALSE(reversed);
  EXPECT_NE(reversed.status().message().find("is not before"), std::string::npos)
      << reversed.status().message();
  StatusOr<double> unknown = backend.waitFenceTimed(*a, *b + 100);
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.status().message().find("never recorded"), std::string::npos)
      << unknown.status().message();
  StatusOr<double> passed = backend.waitFenceTimed(starts.back(), *b);
  ASSERT_FALSE(passed);
  EXPECT_NE(passed.status().message().find("already waited for"), std::string::npos)
      << passed.status().message();
  StatusOr<double> ok = backend.waitFenceTimed(*a, *b);
  ASSERT_TRUE(ok) << ok.status().message();
  EXPECT_GE(*ok, 0.0);
  for (float **buffers : {in, out})
    for (int i = 0; i < 2; ++i)
      backend.freeHost(buffers[i]);
}

} // namespace gptc::testing

#endif // GPTC_TEST_UNIT_RUNTIME_EXECUTOR_ASYNCSTEPS_H
