/* sha256.h: SHA-256 (FIPS 180-4), for model fingerprints. */
#ifndef LLM_SHA256_H
#define LLM_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct sha256 {
	uint32_t h[8];
	uint64_t len;
	uint8_t buf[64];
	size_t nbuf;
};

void sha256_init(struct sha256 *c);
void sha256_update(struct sha256 *c, const void *p, size_t n);
void sha256_final(struct sha256 *c, uint8_t out[32]);

#endif
