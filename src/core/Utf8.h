// Well-formed UTF-8, as Python's strict decoder accepts it: what NameTable and JsonWriter check
// before a string reaches kineto's trace or Python. No dependency beyond the standard library
// (the record-walker fuzzer compiles it without torch).
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace torch_mspti {

// Length of the well-formed UTF-8 sequence at p (n bytes available), or 0: no overlong forms,
// no UTF-16 surrogates, nothing above U+10FFFF (Unicode table 3-7).
size_t utf8SequenceLength(const unsigned char* p, size_t n);
// True when every byte of `s` belongs to a well-formed UTF-8 sequence.
bool isValidUtf8(std::string_view s);

// Walks `s`: well-formed UTF-8 sequences of two bytes or more are appended to `out` as they are;
// every other byte (ASCII, or not part of a well-formed sequence) goes to byte(c, wellFormed).
template <typename Byte>
void forEachUtf8Byte(std::string& out, std::string_view s, Byte byte) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = p[i];
    const size_t len = c >= 0x80 ? utf8SequenceLength(p + i, s.size() - i) : 1;
    if (len > 1) out.append(s.data() + i, len);
    else byte(c, len == 1);
    i += len > 1 ? len : 1;
  }
}

// Appends `s` in a form that needs no JSON escape and that kineto's trace writer keeps as it is
// (it turns '\\' into '/' and drops '\n' in names and metadata: output_json.cpp
// sanitizeStrForJSON, kineto ce13b132): well-formed UTF-8 kept, '"' -> '\'', '\\' -> '/',
// control characters -> ' ', other bytes -> '?'.
void appendKinetoSafeText(std::string& out, std::string_view s);

}  // namespace torch_mspti
