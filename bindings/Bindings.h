// The topics of the torch_mspti._C module, one source file each.
#pragma once

#include <nanobind/nanobind.h>

namespace torch_mspti::bindings {
void bindConfig(nanobind::module_& m);
void bindDiagnostics(nanobind::module_& m);
}  // namespace torch_mspti::bindings
