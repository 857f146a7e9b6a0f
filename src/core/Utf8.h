// Well-formed UTF-8, as Python's strict decoder accepts it: what NameTable and JsonWriter check
// before a string reaches kineto's trace or Python. No dependency beyond the standard library
// (the record-walker fuzzer compiles it without torch).
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string_view>

namespace torch_mspti {

// Length of the well-formed UTF-8 sequence at p (n bytes available), or 0: no overlong forms,
// no UTF-16 surrogates, nothing above U+10FFFF (Unicode table 3-7).
size_t utf8SequenceLength(const unsigned char* p, size_t n);
// True when every byte of `s` belongs to a well-formed UTF-8 sequence.
bool isValidUtf8(std::string_view s);

}  // namespace torch_mspti
