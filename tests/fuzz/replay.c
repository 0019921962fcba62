/* SPDX-License-Identifier: Apache-2.0
 * replay.c — a driver for libFuzzer targets when the compiler has no libFuzzer: runs the
 * target over every file of a seed corpus directory, then over a bounded number of
 * seeded random mutations of them (bit flips, byte sets, interesting values, inserts,
 * deletes, block copies, splices). A target failure aborts, which fails the test.
 *   replay CORPUS_DIR [--mutations N] [--seed S]
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REPLAY_MAX_INPUT 16384

struct input {
	uint8_t *data;
	size_t len;
};

static uint64_t rng_state;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int load_corpus(const char *dir, struct input **out, size_t *n)
{
	DIR *d = opendir(dir);
	if (!d) {
		fprintf(stderr, "replay: cannot open %s: %s\n", dir, strerror(errno));
		return -1;
	}
	char **names = NULL;
	size_t nn = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		names = realloc(names, (nn + 1) * sizeof(*names));
		names[nn++] = strdup(de->d_name);
	}
	closedir(d);
	/* Sorted, so the run does not depend on the directory order. */
	qsort(names, nn, sizeof(*names), cmp_names);
	*out = calloc(nn ? nn : 1, sizeof(**out));
	*n = 0;
	for (size_t i = 0; i < nn; i++) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		FILE *f = fopen(path, "rb");
		if (f) {
			uint8_t *buf = malloc(REPLAY_MAX_INPUT);
			size_t len = fread(buf, 1, REPLAY_MAX_INPUT, f);
			fclose(f);
			(*out)[*n].data = buf;
			(*out)[*n].len = len;
			(*n)++;
		}
		free(names[i]);
	}
	free(names);
	return 0;
}

static size_t mutate(uint8_t *b, size_t len, const struct input *corpus, size_t ncorpus)
{
	static const uint8_t interesting[] = { 0, 1, 0x7f, 0x80, 0xff, 0x40, 0x10, 8 };
	unsigned nmut = 1 + (unsigned)(rnd() % 4);
	for (unsigned m = 0; m < nmut; m++) {
		unsigned kind = (unsigned)(rnd() % 7);
		if (len == 0)
			kind = 3;
		switch (kind) {
		case 0: /* flip a bit */
			b[rnd() % len] ^= (uint8_t)(1u << (rnd() % 8));
			break;
		case 1: /* random byte */
			b[rnd() % len] = (uint8_t)rnd();
			break;
		case 2: /* interesting value */
			b[rnd() % len] = interesting[rnd() % sizeof(interesting)];
			break;
		case 3: /* insert a byte */
			if (len < REPLAY_MAX_INPUT) {
				size_t at = len ? rnd() % (len + 1) : 0;
				memmove(b + at + 1, b + at, len - at);
				b[at] = (uint8_t)rnd();
				len++;
			}
			break;
		case 4: /* delete a run */
		{
			size_t at = rnd() % len;
			size_t n = 1 + rnd() % 8;
			if (n > len - at)
				n = len - at;
			memmove(b + at, b + at + n, len - at - n);
			len -= n;
			break;
		}
		case 5: /* copy a block within */
		{
			size_t from = rnd() % len, to = rnd() % len;
			size_t n = 1 + rnd() % 16;
			if (n > len - from)
				n = len - from;
			if (n > len - to)
				n = len - to;
			memmove(b + to, b + from, n);
			break;
		}
		default: /* splice: the tail of another input */
		{
			const struct input *o = &corpus[rnd() % ncorpus];
			if (!o->len)
				break;
			size_t at = rnd() % (len + 1);
			size_t from = rnd() % o->len;
			size_t n = o->len - from;
			if (at + n > REPLAY_MAX_INPUT)
				n = REPLAY_MAX_INPUT - at;
			memcpy(b + at, o->data + from, n);
			len = at + n;
			break;
		}
		}
	}
	return len;
}

int main(int argc, char **argv)
{
	const char *dir = NULL;
	unsigned long mutations = 1000, seed = 1;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--mutations") && i + 1 < argc)
			mutations = strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			seed = strtoul(argv[++i], NULL, 0);
		else if (argv[i][0] != '-')
			dir = argv[i];
		else {
			fprintf(stderr, "usage: %s CORPUS_DIR [--mutations N] [--seed S]\n",
				argv[0]);
			return 2;
		}
	}
	if (!dir) {
		fprintf(stderr, "usage: %s CORPUS_DIR [--mutations N] [--seed S]\n", argv[0]);
		return 2;
	}
	struct input *corpus;
	size_t n;
	if (load_corpus(dir, &corpus, &n) < 0)
		return 1;
	if (n == 0) {
		fprintf(stderr, "replay: empty corpus %s\n", dir);
		return 1;
	}
	for (size_t i = 0; i < n; i++)
		LLVMFuzzerTestOneInput(corpus[i].data, corpus[i].len);
	rng_state = 0x9E3779B97F4A7C15ull ^ (seed * 0x100000001b3ull);
	uint8_t *buf = malloc(REPLAY_MAX_INPUT);
	for (unsigned long m = 0; m < mutations; m++) {
		const struct input *base = &corpus[rnd() % n];
		memcpy(buf, base->data, base->len);
		size_t len = mutate(buf, base->len, corpus, n);
		LLVMFuzzerTestOneInput(buf, len);
	}
	printf("replay: %zu corpus inputs, %lu mutations, seed %lu: ok\n", n, mutations, seed);
	for (size_t i = 0; i < n; i++)
		free(corpus[i].data);
	free(corpus);
	free(buf);
	return 0;
}
