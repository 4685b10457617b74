# llm version
VERSION = 0.1

# paths
PREFIX = /usr/local
MANPREFIX = $(PREFIX)/share/man

# flags
CC = cc
CFLAGS = -std=c11 -O2 -g -Wall -Wextra
CPPFLAGS = -D_DEFAULT_SOURCE
LDFLAGS =
LDLIBS = -lpthread -lm
