# shellcheck shell=bash
# SPDX-License-Identifier: Apache-2.0
# mpi_netns_lib.sh — sourced by the MPI tests that run an appliance in a network namespace
# (mpi_tallyd.sh, mpi_udpd_gso.sh) after tests/e2e/lib.sh: mpi_netns_setup APP picks the
# test program, the library and mpirun of $MPI (ompi|mpich) under $BIN, skips without that
# mpirun, and makes namespaces a (the appliance) and w (the ranks) joined by a veth.
mpi_netns_setup() {
	APP=$1
	TEST="$BIN/tests/mpi/test_mpi_$MPI"
	if [ "$MPI" = ompi ]; then
		LIB="$BIN/gpu_agent/mpi/libtally_mpi.so" RUN=mpirun.openmpi
	else
		LIB="$BIN/gpu_agent/mpi/libtally_mpi_mpich.so" RUN=mpirun.mpich
	fi
	command -v $RUN >/dev/null || e2e_skip "$RUN absent"
	[ -x "$APP" ] && [ -x "$TEST" ] && [ -f "$LIB" ] || e2e_fail "no $APP, $TEST or $LIB"
	unset MALLOC_PERTURB_ TALLY_GSO
	mult=${TALLY_TIMEOUT_MULTIPLIER:-1}
	e2e_ns a
	e2e_ns w
	e2e_veth a a0 w w0 9000
}
