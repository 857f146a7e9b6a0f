// KindHandlers: the core's kind table. Each kind's setting is a real bool setting (typed, so a
// misspelt one does not compile, and one wired to a field that no setting stores fails here);
// the kinds the plugin collects are the ones the README's settings name; what the walk keeps and
// which launches each kind's rows answer are as the drain and the trace builder rely on.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "ActivityKinds.h"
#include "Config.h"
#include "KindHandlers.h"

namespace torch_mspti::test {
namespace {

TEST(KindHandlers, EachCollectedKindIsSwitchedByItsOwnBoolSetting) {
  std::map<std::string, std::string> settingOf;
  for (const ActivityKindInfo& k : kActivityKinds) {
    const KindHandler& h = kindHandler(k.kind);
    EXPECT_EQ(h.kind, k.kind);
    if (!h.enabledBy) continue;
    const char* name = boolSettingName(h.enabledBy);
    ASSERT_NE(name, nullptr) << k.name << ": its enable flag is not a setting";
    settingOf[k.name] = name;
  }
  const std::map<std::string, std::string> expected = {
      {"KERNEL", "enable_kernels"},
      {"API", "enable_api_records"},
      {"RUNTIME_API", "enable_api_records"},
      {"MEMSET", "enable_memcpy_memset"},
      {"MEMCPY", "enable_memcpy_memset"},
      {"EXTERNAL_CORRELATION", "enable_external_correlation"},
      {"COMMUNICATION", "enable_communication"},
      {"MEMORY", "enable_memory"},
      {"MARKER", "enable_markers"},
  };
  EXPECT_EQ(settingOf, expected);
}

TEST(KindHandlers, DeviceRowsAnswerTheirLaunchClassAndOnlyDeviceKindsHaveRows) {
  EXPECT_EQ(kindHandler(MSPTI_ACTIVITY_KIND_KERNEL).answers, LaunchClass::kKernel);
  EXPECT_EQ(kindHandler(MSPTI_ACTIVITY_KIND_COMMUNICATION).answers, LaunchClass::kCommunication);
  EXPECT_EQ(kindHandler(MSPTI_ACTIVITY_KIND_MEMCPY).answers, LaunchClass::kMemcpy);
  EXPECT_EQ(kindHandler(MSPTI_ACTIVITY_KIND_MEMSET).answers, LaunchClass::kMemset);
  EXPECT_EQ(kindHandler(MSPTI_ACTIVITY_KIND_MEMORY).answers, LaunchClass::kMemory);  // the allocation call
  for (const ActivityKindInfo& k : kActivityKinds) {
    const KindHandler& h = kindHandler(k.kind);
    EXPECT_EQ(h.keptAs == KeptAs::kDeviceRow, h.row != TraceRow::kNone) << k.name;
    if (h.keptAs != KeptAs::kDeviceRow && h.keptAs != KeptAs::kMemoryEvent) {
      EXPECT_EQ(h.answers, LaunchClass::kNone) << k.name;
    }
  }
  EXPECT_EQ(kindHandler(MSPTI_ACTIVITY_KIND_COMMUNICATION).row, TraceRow::kKernel);  // device time, as NCCL's
  EXPECT_EQ(kindHandler(MSPTI_ACTIVITY_KIND_RUNTIME_API).keptAs, KeptAs::kApiCall);
  EXPECT_EQ(kindHandler(MSPTI_ACTIVITY_KIND_ACL_API).enabledBy, nullptr);  // kept if given, never enabled
}

TEST(KindHandlers, OnlyCopiesMemsetsAndMemoryRecordsAreNotPulledByDisable) {
  for (const ActivityKindInfo& k : kActivityKinds) {
    const bool aclHooks = k.kind == MSPTI_ACTIVITY_KIND_MEMCPY || k.kind == MSPTI_ACTIVITY_KIND_MEMSET ||
                          k.kind == MSPTI_ACTIVITY_KIND_MEMORY;
    EXPECT_EQ(kindHandler(k.kind).pulledByDisable, !aclHooks) << k.name;
  }
}

TEST(KindHandlers, AValueOutsideTheKindsGetsTheInertRow) {
  const KindHandler& h = kindHandler(0xFFFFFFFFu);
  EXPECT_EQ(h.kind, MSPTI_ACTIVITY_KIND_INVALID);
  EXPECT_EQ(h.read, nullptr);
  EXPECT_EQ(h.enabledBy, nullptr);
}

struct CollectFacts final : RowFacts {
  std::string text_;
  void text(const std::string& k, const std::string& v) override { text_ += k + "=" + v + ";"; }
  void number(const std::string& k, uint64_t v) override { text_ += k + "=" + std::to_string(v) + ";"; }
  void real(const std::string& k, double) override { text_ += k + "=real;"; }
};

// MSPTI's facts about a collective; its group's facts ("In msg nelems", "Process Group Name" and the
// others) are the collective join's (CollectiveJoinTest).
TEST(KindHandlers, ACollectiveRowCarriesMsptisFactsUnderTheNcclKeys) {
  const std::string name = "hcom_allReduce__1_0_1", alg = "RING", group = "hccl_world_group";
  DeviceRecord r;
  r.kind = MSPTI_ACTIVITY_KIND_COMMUNICATION;
  r.name = &name;
  r.detail = &alg;
  r.group = &group;
  r.count = 1024;
  r.subkind = 4;  // Float
  CollectFacts facts;
  kindHandler(r.kind).describe(r, facts);
  EXPECT_EQ(facts.text_,
            "type=COMMUNICATION;Collective name=allreduce;algorithm=RING;dtype=Float;bytes=4096;comm "
            "name=hccl_world_group;");
  EXPECT_EQ(kindHandler(r.kind).rowName(r), name);
}

}  // namespace
}  // namespace torch_mspti::test
