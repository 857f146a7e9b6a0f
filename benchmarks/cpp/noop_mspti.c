/* libmspti_noop.so: every MSPTI entry point torch-mspti resolves, doing nothing.
 *
 * The per-op benchmark (bench_pushpop.cpp) arms the plugin's CorrelationForwarder with these so
 * that the measured cost of push/pop is the plugin's own (thread-local stacks and op log,
 * generation checks, one indirect call each way) and not MSPTI's. Push and pop succeed; pop reports the id pushed last
 * on this thread so the forwarder's interleaving check sees a matching id, as it would with no other thread around. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mspti/mspti.h>

static __thread uint64_t tLast;

msptiResult msptiSubscribe(msptiSubscriberHandle* s, msptiCallbackFunc cb, void* ud) {
  (void)cb;
  (void)ud;
  if (s) *s = (msptiSubscriberHandle)(uintptr_t)1;
  return MSPTI_SUCCESS;
}
msptiResult msptiUnsubscribe(msptiSubscriberHandle s) {
  (void)s;
  return MSPTI_SUCCESS;
}
msptiResult msptiActivityRegisterCallbacks(msptiBuffersCallbackRequestFunc r, msptiBuffersCallbackCompleteFunc c) {
  (void)r;
  (void)c;
  return MSPTI_SUCCESS;
}
msptiResult msptiActivityEnable(msptiActivityKind k) {
  (void)k;
  return MSPTI_SUCCESS;
}
msptiResult msptiActivityDisable(msptiActivityKind k) {
  (void)k;
  return MSPTI_SUCCESS;
}
msptiResult msptiActivityFlushAll(uint32_t f) {
  (void)f;
  return MSPTI_SUCCESS;
}
msptiResult msptiActivityFlushPeriod(uint32_t t) {
  (void)t;
  return MSPTI_SUCCESS;
}
bool msptiActivityIsEnabled(msptiActivityKind k) {
  (void)k;
  return false;
}
msptiResult msptiActivityPushExternalCorrelationId(msptiExternalCorrelationKind k, uint64_t id) {
  (void)k;
  tLast = id;
  return MSPTI_SUCCESS;
}
msptiResult msptiActivityPopExternalCorrelationId(msptiExternalCorrelationKind k, uint64_t* last) {
  (void)k;
  if (!last) return MSPTI_ERROR_INVALID_PARAMETER;
  *last = tLast;
  return MSPTI_SUCCESS;
}
