// What torch.distributed knows of each HCCL communicator of this process: the process group it
// serves and how many collectives that group has issued. The Python package supplies it
// (torch_mspti/_communicators.py, through _C.set_communicator_provider); the session samples it
// at start and at stop, and the collective join (CollectiveJoin.h) names each COMMUNICATION row's
// group and numbers its collectives from it.
// Thread-safety: plain data.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace torch_mspti {

struct CommunicatorInfo {
  std::string commName;        // HCCL's communicator name: MSPTI's commName, the mstx message's groupName
  std::string pgName;          // c10d's name of the group ("0" for the default group), as in pg_config
  std::string pgDesc;          // c10d's description ("default_pg", or new_group's group_desc)
  std::vector<int64_t> ranks;  // global ranks of the group, in group order (pg_config's "ranks")
  int64_t rank = -1;           // this process's rank in the group; -1 when not a member
  // Collectives and point-to-point calls the group has issued so far (ProcessGroupHCCL's seq_,
  // torch_npu.md 6); -1 when the backend does not say.
  int64_t seq = -1;
};

// By commName. A sample the provider could not give is empty.
using CommunicatorMap = std::map<std::string, CommunicatorInfo>;

// Called at start and at stop, on the thread that starts or stops the session; may be empty.
using CommunicatorsProvider = std::function<std::vector<CommunicatorInfo>()>;

inline CommunicatorMap sampleCommunicators(const CommunicatorsProvider& provider) {
  CommunicatorMap out;
  if (!provider) return out;
  for (CommunicatorInfo& c : provider()) {
    if (c.commName.empty()) continue;
    std::string key = c.commName;
    out.insert_or_assign(std::move(key), std::move(c));
  }
  return out;
}

}  // namespace torch_mspti
