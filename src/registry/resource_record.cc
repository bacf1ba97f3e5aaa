#include "registry/resource_record.h"

namespace tarn::registry {

std::string RcodeName(Rcode rcode) {
  switch (rcode) {
    case Rcode::kNoError:
      return "NOERROR";
    case Rcode::kFormErr:
      return "FORMERR";
    case Rcode::kServFail:
      return "SERVFAIL";
    case Rcode::kNxDomain:
      return "NXDOMAIN";
    case Rcode::kNotImp:
      return "NOTIMP";
    case Rcode::kRefused:
      return "REFUSED";
    case Rcode::kBadVers:
      return "BADVERS";
  }
  return "RCODE" + std::to_string(static_cast<unsigned>(rcode));
}

std::string TypeName(uint16_t type) {
  switch (type) {
    case kTypeA:
      return "A";
    case kTypeNs:
      return "NS";
    case kTypeSoa:
      return "SOA";
    case kTypePtr:
      return "PTR";
    case kTypeTxt:
      return "TXT";
    case kTypeAaaa:
      return "AAAA";
    case kTypeSrv:
      return "SRV";
    case kTypeOpt:
      return "OPT";
    case kTypeIxfr:
      return "IXFR";
    case kTypeAxfr:
      return "AXFR";
    case kTypeAny:
      return "ANY";
    default:
      return "TYPE" + std::to_string(type);
  }
}

}  // namespace tarn::registry
