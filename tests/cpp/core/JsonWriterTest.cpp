// JsonWriter, the UTF-8 checks and NameTable's safe names: whatever bytes a string holds, the
// document is valid JSON; bytes that are not well-formed UTF-8 become \udcXX (surrogateescape),
// so Python's json.loads + os.fsencode give the original bytes back.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "JsonWriter.h"
#include "NameTable.h"
#include "Utf8.h"

namespace torch_mspti::test {
namespace {

std::string jsonString(std::string_view s) {
  JsonWriter w;
  w.value(nullptr, s);
  return w.str();
}

TEST(Utf8, WellFormedSequencesOnly) {
  auto len = [](std::string_view s) {
    return utf8SequenceLength(reinterpret_cast<const unsigned char*>(s.data()), s.size());
  };
  EXPECT_EQ(len("a"), 1u);
  EXPECT_EQ(len("\xc3\xa9"), 2u);          // é
  EXPECT_EQ(len("\xe2\x82\xac"), 3u);      // €
  EXPECT_EQ(len("\xf0\x9f\x98\x80"), 4u);  // 😀
  EXPECT_EQ(len("\xf4\x8f\xbf\xbf"), 4u);  // U+10FFFF
  EXPECT_EQ(len("\xc0\xaf"), 0u);          // overlong '/'
  EXPECT_EQ(len("\xe0\x80\xaf"), 0u);      // overlong
  EXPECT_EQ(len("\xed\xa0\x80"), 0u);      // UTF-16 surrogate D800
  EXPECT_EQ(len("\xf4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(len("\xf5\x80\x80\x80"), 0u);
  EXPECT_EQ(len("\x80"), 0u);      // a lone continuation byte
  EXPECT_EQ(len("\xe2\x82"), 0u);  // truncated
  EXPECT_EQ(len("\xc3\x28"), 0u);  // bad continuation
  EXPECT_EQ(len(""), 0u);
  EXPECT_TRUE(isValidUtf8("plain \xe2\x82\xac"));
  EXPECT_FALSE(isValidUtf8("bad \xff"));
  EXPECT_TRUE(isValidUtf8(""));
}

TEST(JsonWriter, InvalidUtf8BecomesSurrogateEscapes) {
  EXPECT_EQ(jsonString("/opt/\xff\xfe/lib"), "\"/opt/\\udcff\\udcfe/lib\"");
  EXPECT_EQ(jsonString("ok \xe2\x82\xac"), "\"ok \xe2\x82\xac\"");     // kept as is
  EXPECT_EQ(jsonString("\xe2\x82"), "\"\\udce2\\udc82\"");             // a truncated sequence
  EXPECT_EQ(jsonString("\xed\xa0\x80"), "\"\\udced\\udca0\\udc80\"");  // an encoded surrogate
  EXPECT_EQ(jsonString("\xc3\x28"), "\"\\udcc3(\"");
}

TEST(JsonWriter, ControlCharactersQuotesAndBackslashesAreEscaped) {
  EXPECT_EQ(jsonString("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(jsonString("\n\r\t"), "\"\\n\\r\\t\"");
  EXPECT_EQ(jsonString(std::string("\x01\x1f\x7f", 3)), "\"\\u0001\\u001f\\u007f\"");
  EXPECT_EQ(jsonString(std::string("nul\0byte", 8)), "\"nul\\u0000byte\"");
}

TEST(JsonWriter, DocumentStructure) {
  JsonWriter w;
  w.beginObject();
  w.value("s", "text").value("b", true).value("u", uint64_t{18446744073709551615ull});
  w.value("i", int64_t{-5})
      .value("d", 0.5)
      .value("nan", std::nan(""))
      .value("inf", std::numeric_limits<double>::infinity());
  w.null("n").value("cstr", static_cast<const char*>(nullptr));
  w.beginArray("a").value(nullptr, 1).value(nullptr, "x").beginObject().endObject().endArray();
  w.beginObject("o").endObject();
  w.endObject();
  EXPECT_EQ(w.str(),
            "{\"s\":\"text\",\"b\":true,\"u\":18446744073709551615,\"i\":-5,\"d\":0.5,\"nan\":null,\"inf\":null,"
            "\"n\":null,\"cstr\":null,\"a\":[1,\"x\",{}],\"o\":{}}");
}

TEST(JsonWriter, KeysAreEscapedToo) {
  JsonWriter w;
  w.beginObject().value("k\"\xff", 1).endObject();
  EXPECT_EQ(w.str(), "{\"k\\\"\\udcff\":1}");
}

TEST(NameTable, SafeNamesForKinetosUnescapedWriter) {
  EXPECT_EQ(safeName(nullptr), "unknown");
  EXPECT_EQ(safeName(""), "unknown");
  EXPECT_EQ(safeName("a\"b\\c\n\x7f"), "a'b/c  ");
  EXPECT_EQ(safeName("bad \xff\xc3\x28 ok \xe2\x82\xac"),
            "bad ?"
            "?( ok \xe2\x82\xac");
  const std::string longName(5000, 'n');
  EXPECT_EQ(safeName(longName.c_str()).size(), 4096u);
  NameTable t;
  const std::string* a = t.intern("MatMul");
  const std::string* b = t.intern("MatMul");
  EXPECT_EQ(a, b);
  EXPECT_NE(t.intern("Add"), a);
  EXPECT_EQ(t.size(), 2u);
  NameCache cache;
  const char* p = "Conv";
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(*cache.lookup(t, p), "Conv");
  EXPECT_EQ(t.size(), 3u);
}

}  // namespace
}  // namespace torch_mspti::test
