// Umbrella header, as the SDK's tools/mspti/include/mspti.h.
#pragma once
#include "mspti_activity.h"
#include "mspti_callback.h"
#include "mspti_result.h"
