# llm version
VERSION = 0.1

# paths
PREFIX = /usr/local
MANPREFIX = $(PREFIX)/share/man

# flags
CC = cc
CFLAGS = -std=c11 -O2 -g -Wall -Wextra
CPPFLAGS = -D_POSIX_C_SOURCE=200809L
LDFLAGS =
LDLIBS = -lpthread -lm
