#include "Utf8.h"

namespace torch_mspti {

size_t utf8SequenceLength(const unsigned char* p, size_t n) {
  if (n == 0) return 0;
  const unsigned char b0 = p[0];
  if (b0 < 0x80) return 1;
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) len = 2;
  else if (b0 == 0xE0) len = 3, lo = 0xA0;
  else if (b0 >= 0xE1 && b0 <= 0xEC) len = 3;
  else if (b0 == 0xED) len = 3, hi = 0x9F;
  else if (b0 >= 0xEE && b0 <= 0xEF) len = 3;
  else if (b0 == 0xF0) len = 4, lo = 0x90;
  else if (b0 >= 0xF1 && b0 <= 0xF3) len = 4;
  else if (b0 == 0xF4) len = 4, hi = 0x8F;
  else return 0;
  if (len > n || p[1] < lo || p[1] > hi) return 0;
  for (size_t i = 2; i < len; ++i)
    if ((p[i] & 0xC0) != 0x80) return 0;
  return len;
}

bool isValidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    const size_t len = utf8SequenceLength(p + i, s.size() - i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

void appendKinetoSafeText(std::string& out, std::string_view s) {
  forEachUtf8Byte(out, s, [&out](unsigned char c, bool wellFormed) {
    if (!wellFormed) out += '?';
    else if (c == '"') out += '\'';
    else if (c == '\\') out += '/';
    else if (c < 0x20 || c == 0x7F) out += ' ';
    else out += static_cast<char>(c);
  });
}

}  // namespace torch_mspti
