#!/usr/bin/env bash
# The Boost headers the project includes, as .devroot/boost-subset.tar.xz (about 2 MB instead of
# the 9.5 MB libboost1.74-dev package): the tracked tree (54 MB since session 32's third
# checkpoint) and the carried .devroot must stay under the device's 64 MiB. Run here, in the
# repository root, after a build (it reads the compiler's dependency lists in build/); dev.sh's
# build step unpacks the archive into /tmp/devroot beside the other packages. Whole component
# folders are kept (not single headers), plus a few that other compilers' branches include, and
# Boost's CMake package files, so find_package(Boost) works as with the package.
set -eu
deb=${1:?usage: boost_subset.sh PATH/libboost1.74-dev_*.deb}
work=$(mktemp -d)
dpkg -x "$deb" "$work"
used=$(cd build && ninja -t deps | grep -o '/usr/include/boost/[^ ]*' | sed 's|/usr/include/boost/||' |
  grep / | cut -d/ -f1 | sort -u)
dirs=""
for d in $used align container predef bind function iterator range tuple endian logic integer ratio \
  typeof functional; do
  [ -d "$work/usr/include/boost/$d" ] && dirs="$dirs usr/include/boost/$d"
done
cmake_dir=usr/lib/x86_64-linux-gnu/cmake
(cd "$work" && tar cJf - $dirs usr/include/boost/*.hpp $cmake_dir/Boost-1.74.0 \
  $cmake_dir/boost_headers-1.74.0 $cmake_dir/BoostDetectToolset-1.74.0.cmake) > .devroot/boost-subset.tar.xz
rm -rf "$work"
ls -l .devroot/boost-subset.tar.xz
