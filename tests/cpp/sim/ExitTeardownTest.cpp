// Option destroy_at_exit: MSPTI called from a static destructor that runs after the library's own
// statics were destroyed (a plugin tearing down a session at exit) aborts with a message.
#include <cstdlib>

#include "SimTestSupport.h"

namespace torch_mspti::sim::test {
namespace {

// Built before main, hence before the simulator is loaded: destroyed after the simulator's
// statics, like the statics of a plugin that dlopens MSPTI after it was itself loaded.
struct FlushAtExit {
  bool armed = false;
  ~FlushAtExit() {
    if (armed) {
      SimApi::get().flushAll(1);
    }
  }
};
FlushAtExit gFlushAtExit;

class ExitTeardownTest : public SimTest {};

TEST_F(ExitTeardownTest, AnMsptiCallDuringStaticDestructionAbortsNamingTheCall) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        api_.setOption("destroy_at_exit", 1);
        gFlushAtExit.armed = true;
        std::exit(0);
      },
      "libmspti_sim: msptiActivityFlushAll called after the library was torn down at process exit");
}

TEST_F(ExitTeardownTest, WithoutTheOptionTheSameCallIsHarmless) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        gFlushAtExit.armed = true;
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(ExitTeardownTest, CallsBeforeStaticDestructionAreUnaffected) {
  ASSERT_EQ(api_.setOption("destroy_at_exit", 1), 0);
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL});
  api_.launchKernel("k", nullptr, 0, 51, 1000);
  waitForDelivery();
  EXPECT_EQ(flushAndDecode().kernels.size(), 1u);
}

}  // namespace
}  // namespace torch_mspti::sim::test
