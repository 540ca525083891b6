#!/bin/sh
# A C++ compiler that links libstdc++ statically, like the GPU machine's CXX=/opt/gcc/bin/g++:
# the real compiler ($COLLMM_REAL_CXX) with -static-libstdc++ added to every call.
exec "$COLLMM_REAL_CXX" "$@" -static-libstdc++
