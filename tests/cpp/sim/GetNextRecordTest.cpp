// msptiActivityGetNextRecord's per-thread cursor quirk (mspti.md 2.3, 6 item 2), on hand-built
// buffers.
#include <cstdlib>
#include <cstring>
#include <thread>

#include "SimTestSupport.h"

namespace torch_mspti::sim::test {
namespace {

class GetNextRecordTest : public SimTest {
 protected:
  // An 8-aligned buffer of records of the given kinds, each zeroed except for its kind.
  struct Buffer {
    explicit Buffer(std::initializer_list<int> kinds) {
      for (int kind : kinds) {
        size += strideOf(kind);
      }
      data = static_cast<uint8_t*>(std::aligned_alloc(8, size + 8));
      std::memset(data, 0, size + 8);
      size_t offset = 0;
      for (int kind : kinds) {
        std::memcpy(data + offset, &kind, sizeof(kind));
        offsets.push_back(offset);
        offset += strideOf(kind);
      }
    }
    ~Buffer() { std::free(data); }
    static size_t strideOf(int kind) {
      switch (kind) {
        case MSPTI_ACTIVITY_KIND_KERNEL: return sizeof(msptiActivityKernel);
        case MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(msptiActivityExternalCorrelation);
        case MSPTI_ACTIVITY_KIND_API:
        case MSPTI_ACTIVITY_KIND_ACL_API:
        case MSPTI_ACTIVITY_KIND_NODE_API:
        case MSPTI_ACTIVITY_KIND_RUNTIME_API: return sizeof(msptiActivityApi);
        case MSPTI_ACTIVITY_KIND_COMMUNICATION: return sizeof(msptiActivityCommunication);
        case MSPTI_ACTIVITY_KIND_MEMORY: return sizeof(msptiActivityMemory);
        default: return 24;  // unknown kinds in these tests occupy 24 bytes
      }
    }
    uint8_t* at(size_t index) const { return data + offsets.at(index); }
    uint8_t* data = nullptr;
    size_t size = 0;
    std::vector<size_t> offsets;
  };

  // Walks to MAX_LIMIT_REACHED so the thread's cursor is reset; returns the records seen.
  std::vector<uint8_t*> walk(const Buffer& buffer) {
    std::vector<uint8_t*> seen;
    msptiActivity* record = nullptr;
    msptiResult result;
    while ((result = api_.getNextRecord(buffer.data, buffer.size, &record)) == MSPTI_SUCCESS) {
      seen.push_back(reinterpret_cast<uint8_t*>(record));
    }
    EXPECT_EQ(result, MSPTI_ERROR_MAX_LIMIT_REACHED);
    return seen;
  }

  msptiActivity* next(const Buffer& buffer, msptiResult expected = MSPTI_SUCCESS) {
    msptiActivity* record = nullptr;
    EXPECT_EQ(api_.getNextRecord(buffer.data, buffer.size, &record), expected);
    return record;
  }
};

TEST_F(GetNextRecordTest, StridesBySizeofOfEachKindAndResetsAtTheEnd) {
  const Buffer a({MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, MSPTI_ACTIVITY_KIND_RUNTIME_API, MSPTI_ACTIVITY_KIND_KERNEL,
                  MSPTI_ACTIVITY_KIND_ACL_API, MSPTI_ACTIVITY_KIND_COMMUNICATION, MSPTI_ACTIVITY_KIND_MEMORY});
  EXPECT_EQ(walk(a), (std::vector<uint8_t*>{a.at(0), a.at(1), a.at(2), a.at(3), a.at(4), a.at(5)}));
  EXPECT_EQ(walk(a).size(), 6u);  // the end reset the cursor
}

TEST_F(GetNextRecordTest, TheRecordArgumentIsIgnored) {
  const Buffer a({MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, MSPTI_ACTIVITY_KIND_KERNEL});
  msptiActivity* record = reinterpret_cast<msptiActivity*>(a.at(1));  // "continue after this"
  ASSERT_EQ(api_.getNextRecord(a.data, a.size, &record), MSPTI_SUCCESS);
  EXPECT_EQ(reinterpret_cast<uint8_t*>(record), a.at(0));
  walk(a);
}

TEST_F(GetNextRecordTest, AHalfWalkedBufferPoisonsTheThreadsNextBuffer) {
  const Buffer a({MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION});
  const Buffer b({MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                  MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION});
  ASSERT_EQ(reinterpret_cast<uint8_t*>(next(a)), a.at(0));
  // Another thread has its own cursor.
  std::thread([&] { EXPECT_EQ(walk(b).size(), 3u); }).join();
  // This thread's cursor (24) carries over: b's first record is silently skipped.
  EXPECT_EQ(walk(b), (std::vector<uint8_t*>{b.at(1), b.at(2)}));
  // A cursor beyond a shorter buffer's end reports the end at once (and resets).
  const Buffer c({MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION});
  next(b);
  next(b);
  EXPECT_EQ(next(c, MSPTI_ERROR_MAX_LIMIT_REACHED), nullptr);
  EXPECT_EQ(walk(c).size(), 1u);
}

TEST_F(GetNextRecordTest, NullBufferIsInvalidAndKeepsTheCursor) {
  const Buffer a({MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, MSPTI_ACTIVITY_KIND_KERNEL});
  ASSERT_EQ(reinterpret_cast<uint8_t*>(next(a)), a.at(0));
  msptiActivity* record = nullptr;
  EXPECT_EQ(api_.getNextRecord(nullptr, 100, &record), MSPTI_ERROR_INVALID_PARAMETER);
  EXPECT_EQ(reinterpret_cast<uint8_t*>(next(a)), a.at(1));
  next(a, MSPTI_ERROR_MAX_LIMIT_REACHED);
}

TEST_F(GetNextRecordTest, UnknownKindAnswersInnerAndLeavesTheCursorStale) {
  const Buffer bad({MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, 99, MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION});
  ASSERT_EQ(reinterpret_cast<uint8_t*>(next(bad)), bad.at(0));
  next(bad, MSPTI_ERROR_INNER);
  next(bad, MSPTI_ERROR_INNER);  // stuck: the cursor does not move past it
  // The stale cursor (24) applies to the thread's next buffer: its first record is skipped.
  const Buffer good({MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, MSPTI_ACTIVITY_KIND_KERNEL});
  EXPECT_EQ(reinterpret_cast<uint8_t*>(next(good)), good.at(1));
  next(good, MSPTI_ERROR_MAX_LIMIT_REACHED);
  for (int kind : {0, 13, 1000}) {
    const Buffer unknown({kind});
    next(unknown, MSPTI_ERROR_INNER);
    msptiActivity* record = nullptr;
    // Only reaching "the end" resets the cursor: a zero valid size does it here.
    EXPECT_EQ(api_.getNextRecord(unknown.data, 0, &record), MSPTI_ERROR_MAX_LIMIT_REACHED);
  }
}

}  // namespace
}  // namespace torch_mspti::sim::test
