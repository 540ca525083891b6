# cuda.cmake: decides COLLMM_HAVE_CUDA and finds NCCL (beside CUDA, under COLLMM_NCCL_ROOT, or
# in the PyTorch venv's nvidia/nccl as on the GPU test machine).
set(COLLMM_HAVE_CUDA OFF)
if(NOT COLLMM_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  find_package(CUDAToolkit QUIET)
  find_path(NCCL_INCLUDE_DIR nccl.h
    HINTS ${COLLMM_NCCL_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS}
          /opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/include)
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2
    HINTS ${COLLMM_NCCL_ROOT}/lib ${CUDAToolkit_LIBRARY_DIR}
          /opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib)
  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(COLLMM_HAVE_CUDA ON)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    enable_language(CUDA)
    # The .cu files are C++20 too (they include collmm/types.hpp): without a CUDA_STANDARD of their
    # own they take CMAKE_CXX_STANDARD. CMake 3.25 knows no C++20 flag for nvcc (12.0 and later
    # take -std=c++20), so it is said here where CMake does not say it itself.
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    add_library(collmm_nccl INTERFACE)
    target_include_directories(collmm_nccl INTERFACE ${NCCL_INCLUDE_DIR})
    target_link_libraries(collmm_nccl INTERFACE ${NCCL_LIBRARY})
    message(STATUS "collmm: CUDA backend ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, NCCL ${NCCL_LIBRARY})")
  elseif(COLLMM_CUDA STREQUAL "ON")
    message(FATAL_ERROR "COLLMM_CUDA=ON but nvcc, the CUDA toolkit or NCCL was not found")
  else()
    message(STATUS "collmm: CUDA backend OFF (nvcc, CUDA toolkit or NCCL not found)")
  endif()
endif()
