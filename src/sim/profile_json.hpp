// profile_json.hpp: a Profile's JSON form (collmm/profile.hpp), written by save_profile and
// collmm-sim's --json, read by load_profile from a file. Reading checks every field's range and
// throws UsageError naming the key.
#pragma once

#include <nlohmann/json.hpp>

#include "collmm/profile.hpp"

namespace collmm {

nlohmann::json to_json(const Profile&);
Profile profile_from_json(const nlohmann::json&);

}  // namespace collmm
