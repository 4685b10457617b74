/*
 * fuzz.h: what the fuzz targets share.  Each target defines
 * LLVMFuzzerTestOneInput; built with clang -fsanitize=fuzzer it is a
 * libFuzzer program (make fuzz), and linked with replay.c it runs the
 * files it is given once each (make check replays the regression corpus).
 */
#ifndef LLM_FUZZ_H
#define LLM_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * The input as a file that the readers can open by name, as the tools
 * do: one memfd per process, rewritten for each input.
 */
const char *fuzz_file(const uint8_t *data, size_t size);

/* A directory for files a target writes once at start. */
const char *fuzz_dir(void);

#endif
