/* A latency histogram with log-scale buckets: four to each power of two,
 * so a bucket is at most a quarter of its lowest value wide, and 160 buckets
 * reach past 2^40 us (twelve days). Percentiles read from it are the
 * middle of the bucket they fall in: within 12.5% of the true value.
 * Counting is one increment of one array element; summing histograms is
 * adding arrays. Pure C, header only: the core's counters and a module's
 * alike use it. */
#ifndef PLXD_HIST_H
#define PLXD_HIST_H

#include <stdint.h>

#define HIST_BUCKETS 160

/* The bucket of a value: values 0..3 have one each; above, the two bits
 * after the leading one pick one of four buckets in its power of two. */
static inline unsigned hist_index(uint64_t v)
{
	if (v < 4)
		return (unsigned)v;
	unsigned e = 63u - (unsigned)__builtin_clzll(v); /* leading one: 2^e <= v */
	unsigned i = 4u * (e - 1u) + (unsigned)((v >> (e - 2u)) & 3u);
	return i < HIST_BUCKETS ? i : HIST_BUCKETS - 1;
}

/* The lowest value of bucket i, and its width. */
static inline uint64_t hist_low(unsigned i)
{
	if (i < 4)
		return i;
	unsigned e = i / 4u + 1u;
	return (uint64_t)(4u + i % 4u) << (e - 2u);
}

static inline uint64_t hist_width(unsigned i)
{
	return i < 4 ? 1 : (uint64_t)1 << (i / 4u - 1u);
}

/* The value below which a fraction q (0 < q <= 1) of the counted values
 * lie, as the middle of its bucket; 0 when nothing was counted. */
static inline uint64_t hist_percentile(const uint64_t b[HIST_BUCKETS], double q)
{
	uint64_t total = 0;
	for (unsigned i = 0; i < HIST_BUCKETS; i++)
		total += b[i];
	if (total == 0)
		return 0;
	uint64_t rank = (uint64_t)(q * (double)total + 0.999999); /* 1-based, rounded up */
	if (rank < 1)
		rank = 1;
	uint64_t seen = 0;
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		seen += b[i];
		if (seen >= rank)
			return hist_low(i) + hist_width(i) / 2;
	}
	return hist_low(HIST_BUCKETS - 1);
}

#endif
