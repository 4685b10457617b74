# llm version
VERSION = 0.1

# paths
PREFIX = /usr/local
MANPREFIX = $(PREFIX)/share/man

# flags
CC = cc
# -ffp-contract=off: a * b + c stays two roundings on every compiler, so
# results do not depend on which one built them (kernels.c's rules);
# every fused multiply-add is written as one.
CFLAGS = -std=c11 -O2 -g -Wall -Wextra -ffp-contract=off
CPPFLAGS = -D_DEFAULT_SOURCE -DLLM_VERSION=\"$(VERSION)\"
LDFLAGS =
LDLIBS = -lpthread -lm

# SIMD kernels: each file is built for its instruction set and used only
# when cpuid says the processor has it.  Empty these off x86.
AVX2_CFLAGS = -mavx2 -mfma -mf16c
AVX512_CFLAGS = -mavx512f -mavx512bw -mavx512vl -mfma -mf16c
VNNI_CFLAGS = $(AVX512_CFLAGS) -mavx512vnni
AMX_CFLAGS = $(VNNI_CFLAGS) -mamx-tile -mamx-int8
