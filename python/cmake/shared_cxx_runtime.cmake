# shared_cxx_runtime.cmake: refuses a C++ compiler that puts its own copy of the C++ runtime
# (libstdc++) into what it links, as a wrapper that adds -static-libstdc++ does (seen on the GPU
# machine: CXX=/opt/gcc/bin/g++). An extension built that way holds a second libstdc++ beside the
# one torch loaded; the two disagree on the iostream facets, and the first `stream << number` in
# the extension crashes the process (SIGSEGV in std::ostream::_M_insert<long>).
#
# The test: link a program that writes a number to a stream and look for the runtime's locale
# machinery (std::locale::id::_M_id) defined inside it. A shared libstdc++ leaves it undefined.
function(collmm_require_shared_cxx_runtime)
  set(dir ${CMAKE_BINARY_DIR}/CMakeFiles/collmm_cxx_runtime)
  file(WRITE ${dir}/probe.cpp "#include <sstream>\nint main() { std::ostringstream s; s << 42L; return s.str().size() == 2 ? 0 : 1; }\n")
  try_compile(linked ${dir}/build SOURCES ${dir}/probe.cpp COPY_FILE ${dir}/probe OUTPUT_VARIABLE log)
  if(NOT linked)
    message(FATAL_ERROR "collmm: ${CMAKE_CXX_COMPILER} cannot link a C++ program:\n${log}")
  endif()
  execute_process(COMMAND ${CMAKE_NM} --defined-only --demangle ${dir}/probe OUTPUT_VARIABLE symbols RESULT_VARIABLE nm_rc)
  if(NOT nm_rc EQUAL 0)
    message(WARNING "collmm: could not list the symbols of a test program (${CMAKE_NM}); not checking that the C++ runtime is shared")
  elseif(symbols MATCHES "std::locale::id::_M_id")
    message(FATAL_ERROR "collmm: ${CMAKE_CXX_COMPILER} links the C++ runtime (libstdc++) statically into what it builds. "
                        "An extension built so holds a second libstdc++ beside torch's and crashes at its first "
                        "stream output. Build with a compiler that links it shared, e.g. CXX=/usr/bin/g++ pip install "
                        "--no-build-isolation .")
  endif()
endfunction()
