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
# POSIX.1-2008 and the extensions each system names: _DEFAULT_SOURCE
# glibc's and musl's, _DARWIN_C_SOURCE macOS's (each ignored elsewhere).
# No instruction-set flags: the kernel files say their own (lib/simd/simd.h).
CPPFLAGS = -D_DEFAULT_SOURCE -D_DARWIN_C_SOURCE -DLLM_VERSION=\"$(VERSION)\"
LDFLAGS =
LDLIBS = -lpthread -lm
