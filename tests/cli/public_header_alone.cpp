// public_header_alone.cpp: the C++ API's header (collmm/collmm.hpp) compiles on its own and brings
// in no JSON library: a program that calls the API needs nlohmann/json neither to build nor on its
// include path. Built into test_cli_context; the build fails where the header pulls it in.
#include "collmm/collmm.hpp"

#ifdef INCLUDE_NLOHMANN_JSON_HPP_
#error "collmm/collmm.hpp includes nlohmann/json"
#endif
