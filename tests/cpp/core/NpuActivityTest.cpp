// NpuActivity: its args render as GenericTraceActivity renders the same args (so the trace, torch's
// events and every consumer see the same text), in the order added, and getMetadataValue answers
// as GenericTraceActivity's does.
#include <gtest/gtest.h>

#include <string>

#include "NpuActivity.h"

namespace torch_mspti::test {
namespace {

using libkineto::ActivityType;
using libkineto::GenericTraceActivity;

const libkineto::TraceSpan kSpan{0, 0, "test"};

TEST(NpuActivity, OneArgRendersAsGenericTraceActivityRendersIt) {
  auto same = [](auto addOurs, auto addKineto) {
    NpuActivity ours(kSpan, ActivityType::CONCURRENT_KERNEL, "k");
    GenericTraceActivity kineto(kSpan, ActivityType::CONCURRENT_KERNEL, "k");
    addOurs(ours);
    addKineto(kineto);
    EXPECT_EQ(ours.metadataJson(), kineto.metadataJson());
  };
  same([](NpuActivity& a) { a.arg("device", int32_t{-3}); },
       [](GenericTraceActivity& a) { a.addMetadata("device", int32_t{-3}); });
  same([](NpuActivity& a) { a.arg("bytes", uint64_t{18446744073709551615u}); },
       [](GenericTraceActivity& a) { a.addMetadata("bytes", uint64_t{18446744073709551615u}); });
  same([](NpuActivity& a) { a.arg("ratio", 0.125); }, [](GenericTraceActivity& a) { a.addMetadata("ratio", 0.125); });
  same([](NpuActivity& a) { a.arg("ms", 1e-7); }, [](GenericTraceActivity& a) { a.addMetadata("ms", 1e-7); });
  same([](NpuActivity& a) { a.quotedArg("link", "verified"); },
       [](GenericTraceActivity& a) { a.addMetadataQuoted("link", "verified"); });
  same([](NpuActivity&) {}, [](GenericTraceActivity&) {});
}

TEST(NpuActivity, ArgsKeepTheirOrderAndAnswerLookups) {
  NpuActivity a(kSpan, ActivityType::CONCURRENT_KERNEL, "allreduce");
  a.arg("device", int32_t{0});
  a.arg("stream", uint32_t{7});
  a.quotedArg("Process Group Ranks", "[0, 1, 2]");  // a quoted value holding ", "
  a.quotedArg("link", "verified");
  a.quotedArg("empty", "");
  a.arg("In msg nelems", uint64_t{1024});
  EXPECT_EQ(a.metadataJson(),
            "\"device\": 0, \"stream\": 7, \"Process Group Ranks\": \"[0, 1, 2]\", \"link\": \"verified\", "
            "\"empty\": \"\", \"In msg nelems\": 1024");
  EXPECT_EQ(a.getMetadataValue("device"), "0");
  EXPECT_EQ(a.getMetadataValue("stream"), "7");
  EXPECT_EQ(a.getMetadataValue("Process Group Ranks"), "[0, 1, 2]");
  EXPECT_EQ(a.getMetadataValue("link"), "verified");
  EXPECT_EQ(a.getMetadataValue("empty"), "");
  EXPECT_EQ(a.getMetadataValue("In msg nelems"), "1024");
  EXPECT_EQ(a.getMetadataValue("missing"), "");
  EXPECT_EQ(a.getMetadataValue("Ranks"), "");  // a key's tail is not a key
  // Read through the interface, as torch and kineto's writers do.
  const libkineto::ITraceActivity& base = a;
  EXPECT_EQ(base.metadataJson(), a.metadataJson());
  EXPECT_EQ(base.getMetadataValue("link"), "verified");
}

}  // namespace
}  // namespace torch_mspti::test
