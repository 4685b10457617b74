/* llm-kvstat: summary and per-layer statistics of a KV snapshot. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/kv.h"
#include "../lib/snapshot.h"
#include "../lib/util.h"
#include "tool.h"

struct stat_row {
	float min, max;
	double mean_abs, rms;
	uint32_t top_channel;	/* the channel with the largest mean |x| */
	double top_mean_abs;
};

static void
usage(int status)
{
	fprintf(status ? stderr : stdout, "usage: %s [--json] [--svg OUT.svg] [--layer L] FILE\n", argv0);
	if (status == 0)
		printf("every option and what it does: man llm-kvstat, or man -l man/llm-kvstat.1\n");
	exit(status);
}

/*
 * The rows the cache holds live, in the order of their positions, for
 * each window (the global layers', the sliding layers'): all of them, or
 * a window's sinks and its newest positions (a grouped window also
 * stores a few evicted rows that share a group with live ones).
 */
static uint32_t *rows_of[2], n_live_of[2];
static uint32_t n_sinks_of[2];	/* the live rows that are sinks */
static uint32_t *rows, n_live, n_sinks;	/* the global layers', or the sliding ones' if none is global */
static uint32_t axis;			/* a layer of that window */

/* A layer's window: 0 global, 1 sliding. */
static int
win_of(const struct snapshot *s, uint32_t l)
{
	return s->meta.slides ? s->meta.slides[l] : 0;
}

static void
live_rows(const struct snapshot *s)
{
	uint32_t i, r, p, l;

	for (int c = 0; c < 2; c++) {
		const struct snap_win *w = &s->win[c];
		rows_of[c] = xmalloc((w->n_rows ? w->n_rows : 1) * sizeof *rows);
		for (l = 0; l < s->meta.n_layers && win_of(s, l) != c; l++)
			;
		for (i = 0; l < s->meta.n_layers && i < w->n_rows; i++) {
			r = snapshot_row_at(s, l, i);
			p = snapshot_row_pos(s, l, r);
			if (snapshot_live(s, l, p)) {
				rows_of[c][n_live_of[c]++] = r;
				n_sinks_of[c] += w->shape.window && p < (uint32_t)w->shape.sinks &&
				    p + w->shape.window < s->n_pos;
			}
		}
	}
	for (l = 0; l < s->meta.n_layers && win_of(s, l) != 0; l++)
		;
	int c = l < s->meta.n_layers ? 0 : 1;
	rows = rows_of[c], n_live = n_live_of[c], n_sinks = n_sinks_of[c];
	for (axis = 0; win_of(s, axis) != c; axis++)
		;
}

/* Statistics of a layer's K or V, over the values as the model computed them. */
static void
block_stats(const struct snapshot *s, uint32_t layer, int which, float *row, double *chan,
    struct stat_row *st)
{
	const uint32_t *rows = rows_of[win_of(s, layer)];
	uint32_t n_pos = n_live_of[win_of(s, layer)], dim = s->meta.kv_dim, p, d;
	double sum_abs = 0, sum_sq = 0;
	uint64_t i, n = (uint64_t)n_pos * dim;

	st->min = INFINITY;
	st->max = -INFINITY;
	memset(chan, 0, dim * sizeof *chan);
	for (p = 0; p < n_pos; p++) {
		snapshot_row(s, layer, which, rows[p], row);
		for (d = 0; d < dim; d++) {
			float v = row[d];
			st->min = v < st->min ? v : st->min;
			st->max = v > st->max ? v : st->max;
			sum_abs += fabsf(v);
			sum_sq += (double)v * v;
			chan[d] += fabsf(v);
		}
	}
	st->mean_abs = n ? sum_abs / n : 0;
	st->rms = n ? sqrt(sum_sq / n) : 0;
	st->top_channel = 0;
	for (i = 1; i < dim; i++)
		if (chan[i] > chan[st->top_channel])
			st->top_channel = (uint32_t)i;
	st->top_mean_abs = n_pos ? chan[st->top_channel] / n_pos : 0;
	if (n == 0)
		st->min = st->max = 0;
}

/* A JSON number; JSON has no NaN or infinity, so those are null. */
static void
json_number(double v)
{
	if (isfinite(v))
		printf("%.6g", v);
	else
		fputs("null", stdout);
}

static void
hex(const uint8_t *p, size_t n, char *out)
{
	size_t i;

	for (i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", p[i]);
}

/* ---- SVG: layers by positions, colour = L2 norm of each row ---- */

static void
colour(double t, int *r, int *g, int *b)
{
	/* A perceptual dark-blue to yellow ramp (viridis-like) in five stops. */
	static const double stops[5][3] = { { 68, 1, 84 }, { 59, 82, 139 }, { 33, 145, 140 },
		{ 94, 201, 98 }, { 253, 231, 37 } };
	double x = (t > 0 ? (t < 1 ? t : 1) : 0) * 4;	/* NaN goes to 0 */
	int i = x >= 4 ? 3 : (int)x;
	double f = x - i;

	*r = (int)(stops[i][0] + f * (stops[i + 1][0] - stops[i][0]));
	*g = (int)(stops[i][1] + f * (stops[i + 1][1] - stops[i][1]));
	*b = (int)(stops[i][2] + f * (stops[i + 1][2] - stops[i][2]));
}

/* Layers [l0, l0 + L): the caller has verified their checksums. */
static void
write_svg(const struct snapshot *s, const char *path, const char *name, uint32_t l0, uint32_t L)
{
	enum { CELL_W_MAX = 4, COLS_MAX = 512, ROW_H = 10, LEFT = 60, TOP = 40, PANEL_GAP = 70 };
	uint32_t P = n_live, cols = P < COLS_MAX ? P : COLS_MAX;
	double *norm[2], lo[2], hi[2];
	double cell_w = cols ? (P <= COLS_MAX ? CELL_W_MAX : 1024.0 / cols) : 1;
	double panel_w = cols * (P <= COLS_MAX ? CELL_W_MAX : 1024.0 / cols);
	int height = TOP + 2 * ((int)L * ROW_H + PANEL_GAP) + 20, width = LEFT + (int)panel_w + 120;
	float *row = xmalloc(s->meta.kv_dim * sizeof *row);
	FILE *fp;
	uint32_t l, c, p, d;
	int w, r, g, b;
	/* the axis: the positions of the global layers' live rows (rows, n_live, axis) */
	if (cols == 0)
		cols = 1, panel_w = 40;
	/* "-": standard output, which then carries the SVG alone */
	if (!(fp = strcmp(path, "-") == 0 ? stdout : fopen(path, "w")))
		die(1, "%s:", path);
	for (w = KV_K; w <= KV_V; w++) {
		norm[w] = xcalloc((size_t)L * cols, sizeof(double));
		lo[w] = INFINITY, hi[w] = -INFINITY;
		for (l = 0; l < L; l++) {
			for (c = 0; c < cols && P > 0; c++) {
				/* Positions are binned when there are more than COLS_MAX. */
				uint32_t p0 = (uint32_t)((uint64_t)c * P / cols), p1 = (uint32_t)((uint64_t)(c + 1) * P / cols);
				double acc = 0;
				uint32_t held = 0;
				for (p = p0; p < p1; p++) {
					double ss = 0;
					/* a sliding layer holds only its newest positions */
					long rr = snapshot_pos_row(s, l0 + l, snapshot_row_pos(s, axis, rows[p]));
					if (rr < 0)
						continue;
					snapshot_row(s, l0 + l, w, (uint32_t)rr, row);
					for (d = 0; d < s->meta.kv_dim; d++)
						ss += (double)row[d] * row[d];
					acc += sqrt(ss);
					held++;
				}
				/* none held: no cell (the layer's window has evicted them) */
				norm[w][(size_t)l * cols + c] = held ? acc / held : -1;
				if (held && isfinite(acc)) {	/* NaN and infinity are drawn grey */
					lo[w] = fmin(lo[w], acc / held);
					hi[w] = fmax(hi[w], acc / held);
				}
			}
		}
		if (!isfinite(lo[w]))
			lo[w] = 0;
		if (!(hi[w] > lo[w]))
			hi[w] = lo[w] + 1;
	}
	fprintf(fp, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	    "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
	    "font-family=\"sans-serif\" font-size=\"11\">\n"
	    "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", width, height);
	fprintf(fp, "<text x=\"%d\" y=\"18\" font-size=\"14\">", LEFT);
	for (const char *q = name; *q; q++)
		fprintf(fp, *q == '<' ? "&lt;" : *q == '&' ? "&amp;" : *q == '>' ? "&gt;" : "%c", *q);
	fprintf(fp, ": L2 norm of each position's row, %u layers x %u positions", L, P);
	if (s->meta.window)
		fprintf(fp, " (%u sinks, a window of %u; %u positions evicted)", s->meta.sinks,
		    s->meta.window, s->n_pos - P);
	if (s->meta.swa)
		fprintf(fp, " (sliding layers: the newest %u positions)", s->meta.swa);
	fprintf(fp, "</text>\n");
	for (w = KV_K; w <= KV_V; w++) {
		int y0 = TOP + w * ((int)L * ROW_H + PANEL_GAP);
		fprintf(fp, "<text x=\"%d\" y=\"%d\"><tspan font-weight=\"bold\">%s</tspan>", LEFT, y0 - 6,
		    w ? "V" : "K");
		/* a window's parts in the panel's title, where no label overlaps another */
		if (s->meta.window && n_sinks > 0 && n_sinks < P)
			fprintf(fp, "<tspan fill=\"red\">  sinks 0-%u, left of the red line; the window from %u"
			    "</tspan>", snapshot_row_pos(s, axis, rows[n_sinks - 1]),
			    snapshot_row_pos(s, axis, rows[n_sinks]));
		fprintf(fp, "</text>\n");
		fprintf(fp, "<g shape-rendering=\"crispEdges\">\n");
		for (l = 0; l < L; l++)
			for (c = 0; c < cols && P > 0; c++) {
				double v = norm[w][(size_t)l * cols + c];
				if (v == -1)
					continue;
				if (isfinite(v))
					colour((v - lo[w]) / (hi[w] - lo[w]), &r, &g, &b);
				else
					r = g = b = 0x99;
				fprintf(fp, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"#%02x%02x%02x\"/>\n",
				    LEFT + c * cell_w, y0 + (int)l * ROW_H, cell_w + 0.05, ROW_H, r, g, b);
			}
		fprintf(fp, "</g>\n");
		/* Axes: layers down the left, positions along the bottom. */
		for (l = 0; l < L; l += L > 16 ? 5 : 1)
			fprintf(fp, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%u</text>\n",
			    LEFT - 4, y0 + (int)l * ROW_H + ROW_H - 1, l0 + l);
		fprintf(fp, "<text x=\"12\" y=\"%d\" transform=\"rotate(-90 12 %d)\" text-anchor=\"middle\">layer</text>\n",
		    y0 + (int)L * ROW_H / 2, y0 + (int)L * ROW_H / 2);
		/*
		 * Ticks at rows: quarters of them; for a window, its first
		 * row and thirds of the window after it (the positions jump
		 * where the sinks end).  A label too near the one before it
		 * is left out.
		 */
		uint32_t ticks[6], nt = 0, first = s->meta.window && n_sinks > 0 && n_sinks < P ? n_sinks : 0;
		double last_x = -1e9;
		if (first)
			ticks[nt++] = 0;
		for (int k = 0; k <= (first ? 3 : 4); k++)
			ticks[nt++] = first + (uint32_t)((uint64_t)(P - first) * k / (first ? 3 : 4));
		for (uint32_t k = 0; k < nt; k++) {
			uint32_t i = ticks[k];
			double x = LEFT + (P ? panel_w * i / P : 0);
			fprintf(fp, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"black\"/>\n",
			    x, y0 + (int)L * ROW_H, x, y0 + (int)L * ROW_H + 4);
			if (x - last_x < 36)
				continue;
			last_x = x;
			/* the position of the row there: a window's are not 0..P-1 */
			fprintf(fp, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%u</text>\n",
			    x, y0 + (int)L * ROW_H + 15, P == 0 ? 0 : i < P ?
			    snapshot_row_pos(s, axis, rows[i]) : snapshot_row_pos(s, axis, rows[P - 1]) + 1);
		}
		if (first) {
			/* where the sinks end and the window starts */
			double x = LEFT + panel_w * n_sinks / P;
			fprintf(fp, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"red\" "
			    "stroke-width=\"2\"/>\n", x, y0 - 2, x, y0 + (int)L * ROW_H + 4);
		}
		fprintf(fp, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">position</text>\n",
		    LEFT + panel_w / 2, y0 + (int)L * ROW_H + 28);
		/* The colour scale, with its range. */
		for (int k = 0; k < 50; k++) {
			colour(1 - k / 49.0, &r, &g, &b);
			fprintf(fp, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"%.2f\" fill=\"#%02x%02x%02x\"/>\n",
			    LEFT + panel_w + 20, y0 + k * (L * ROW_H / 50.0), L * ROW_H / 50.0 + 0.05, r, g, b);
		}
		fprintf(fp, "<text x=\"%.1f\" y=\"%d\">%.3g</text>\n", LEFT + panel_w + 38, y0 + 9, hi[w]);
		fprintf(fp, "<text x=\"%.1f\" y=\"%d\">%.3g</text>\n", LEFT + panel_w + 38, y0 + (int)L * ROW_H, lo[w]);
		fprintf(fp, "<text x=\"%.1f\" y=\"%d\">|%s|</text>\n", LEFT + panel_w + 38, y0 + (int)L * ROW_H / 2, w ? "v" : "k");
		free(norm[w]);
	}
	fprintf(fp, "</svg>\n");
	free(row);
	if (fp == stdout ? fflush(fp) == EOF : fclose(fp) != 0)
		die(1, "%s:", fp == stdout ? "stdout" : path);
}

/* The file's summary, and the head of the per-layer table (or array). */
static void
print_summary(const struct snapshot *s, const char *path, int json, double per_pos)
{
	uint64_t dense = 2ull * s->meta.n_layers * s->meta.max_ctx * s->meta.kv_dim * sizeof(float);
	char fp[65], types[80];
	uint32_t l;
	int c;

	hex(s->meta.fingerprint, 32, fp);
	if (s->meta.k_type == s->meta.v_type)
		snprintf(types, sizeof types, "%s", kv_type_name(s->meta.k_type));
	else
		snprintf(types, sizeof types, "k %s, v %s", kv_type_name(s->meta.k_type),
		    kv_type_name(s->meta.v_type));

	if (json) {
		printf("{\"file\":");
		json_write_string(stdout, path);
		printf(",\"version\":%u,\"fingerprint\":\"%s\",\"layers\":%u,\"kv_heads\":%u,"
		    "\"head_dim\":%u,\"kv_dim\":%u,\"positions\":%u,\"max_ctx\":%u,"
		    "\"k_type\":\"%s\",\"v_type\":\"%s\",\"bytes_per_position\":%.6g,"
		    "\"rope_dim\":%u,\"rope_base\":%.9g,"
		    "\"bytes_on_disk\":%zu,\"dense_max_ctx_bytes\":%llu,",
		    s->version, fp, s->meta.n_layers, s->meta.n_kv_heads, s->meta.head_dim,
		    s->meta.kv_dim, s->n_pos, s->meta.max_ctx, kv_type_name(s->meta.k_type),
		    kv_type_name(s->meta.v_type), per_pos, s->meta.rope_dim, s->meta.rope_base,
		    s->size, (unsigned long long)dense);
		/* the window's keys belong to the object, before the per-layer array */
		if (s->meta.window)
			printf("\"sinks\":%u,\"window\":%u,\"rows\":%u,\"live_rows\":%u,"
			    "\"evicted\":%u,\"window_first\":%u,", s->meta.sinks, s->meta.window, s->win[0].n_rows,
			    n_live, s->n_pos - n_live, n_live > n_sinks ? snapshot_row_pos(s, axis, rows[n_sinks]) : 0);
		if (s->meta.swa) {
			printf("\"sliding_window\":%u,\"sliding_live_rows\":%u,\"sliding_layers\":[",
			    s->meta.swa, n_live_of[1]);
			for (l = 0, c = 0; l < s->meta.n_layers; l++)
				if (win_of(s, l))
					printf("%s%u", c++ ? "," : "", l);
			printf("],");
		}
		printf("\"per_layer\":[");
	} else {
		printf("file          %s\nversion       %u\nfingerprint   %s\n"
		    "layers        %u\nkv heads      %u\nhead_dim      %u\nkv_dim        %u\n"
		    "positions     %u\nmax_ctx       %u\nelement type  %s\n"
		    "per position  %.6g bytes (K and V, all layers; f32 takes %llu)\n"
		    "bytes on disk %zu\ndense max_ctx %llu bytes (f32 K and V for all %u positions)\n\n",
		    path, s->version, fp, s->meta.n_layers, s->meta.n_kv_heads, s->meta.head_dim,
		    s->meta.kv_dim, s->n_pos, s->meta.max_ctx, types, per_pos,
		    2ull * s->meta.n_layers * s->meta.kv_dim * 4, s->size, (unsigned long long)dense,
		    s->meta.max_ctx);
		if (s->meta.window) {
			printf("window        %u sinks and the newest %u positions: %u live rows (",
			    s->meta.sinks, s->meta.window, n_live);
			if (n_sinks)
				printf("sinks 0-%u, ", n_sinks - 1);
			if (n_live > n_sinks)
				printf("window %u-%u", snapshot_row_pos(s, axis, rows[n_sinks]), s->n_pos - 1);
			printf("), %u evicted\n\n", s->n_pos - n_live);
		}
		if (s->meta.swa) {
			/* the sliding layers, and what they hold */
			printf("sliding       layers");
			for (l = 0, c = 0; l < s->meta.n_layers; l++)
				if (win_of(s, l))
					printf("%s%u", c++ ? "," : " ", l);
			printf(" keep the newest %u positions: %u live rows", s->meta.swa, n_live_of[1]);
			if (n_live_of[1])
				printf(" (%u-%u)", s->n_pos - n_live_of[1], s->n_pos - 1);
			printf(", %u evicted\n\n", s->n_pos - n_live_of[1]);
		}
		printf("%5s  %10s %10s %9s %9s %7s  %10s %10s %9s %9s %7s%s\n", "layer",
		    "K min", "K max", "K mean|x|", "K rms", "K chan", "V min", "V max",
		    "V mean|x|", "V rms", "V chan", s->meta.swa ? "  window" : "");
	}
}

int
main(int argc, char *argv[])
{
	enum { O_JSON = 256, O_SVG, O_LAYER };
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, O_JSON },
		{ "svg", required_argument, NULL, O_SVG },
		{ "layer", required_argument, NULL, O_LAYER },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct snapshot s;
	struct stat_row st[2];
	const char *path, *svg = NULL;
	double *chan;
	long layer = -1;
	uint32_t l, lo, hi;
	int c, json = 0, w, kd;
	double per_pos;
	float *row;

	argv0 = "llm-kvstat";
	argv[0] = (char *)argv0;	/* getopt's own messages name the tool as ours do */
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case O_JSON: json = 1; break;
		case O_SVG: svg = optarg; break;
		case O_LAYER: layer = opt_int("--layer", optarg, 0, INT32_MAX); break;
		case 'h': usage(0); break;
		case 'V': version(); break;
		default: usage(2);
		}
	}
	if (optind != argc - 1)
		usage(2);
	if (svg && strcmp(svg, "-") == 0 && json)
		die(2, "--svg - and --json conflict: both would write to standard output");
	path = argv[optind];
	if (snapshot_open(&s, path) < 0)
		die(1, "%s: %s", path, llm_err());
	if (layer >= (long)s.meta.n_layers)
		die(1, "%s: --layer %ld is out of range (0-%u)", path, layer, s.meta.n_layers - 1);
	lo = layer < 0 ? 0 : (uint32_t)layer;
	hi = layer < 0 ? s.meta.n_layers : (uint32_t)layer + 1;
	for (l = lo; l < hi; l++)
		if (snapshot_verify_block(&s, l, 0) < 0 || snapshot_verify_block(&s, l, 1) < 0)
			die(1, "%s: %s", path, llm_err());
	chan = xcalloc(s.meta.kv_dim, sizeof *chan);
	row = xmalloc(s.meta.kv_dim * sizeof *row);
	/* a whole group of positions, so that grouped keys count what they take; n 0: no tail rows */
	live_rows(&s);
	kd = (int)s.meta.kv_dim;
	per_pos = ((double)kv_type_unit(s.meta.k_type, KV_K, kd) /
	    (kv_type_grouped(s.meta.k_type, KV_K) ? KV_GROUP : 1) +
	    (double)kv_type_unit(s.meta.v_type, KV_V, kd)) * s.meta.n_layers;
	if (svg && strcmp(svg, "-") == 0) {
		/* the SVG alone on standard output: no table before it */
		write_svg(&s, svg, path, lo, hi - lo);
		free(chan), free(row), free(rows_of[0]), free(rows_of[1]);
		snapshot_close(&s);
		return 0;
	}
	print_summary(&s, path, json, per_pos);
	for (l = lo; l < hi; l++) {
		for (w = KV_K; w <= KV_V; w++)
			block_stats(&s, l, w, row, chan, &st[w]);
		if (json) {
			/* its window: the positions it keeps (0: all), and its live rows */
			printf("%s{\"layer\":%u,\"window\":%u,\"live_rows\":%u", l > lo ? "," : "", l,
			    win_of(&s, l) ? s.meta.swa : s.meta.window, n_live_of[win_of(&s, l)]);
			for (w = KV_K; w <= KV_V; w++) {
				printf(",\"%s\":{\"min\":", w ? "v" : "k");
				json_number(st[w].min);
				printf(",\"max\":");
				json_number(st[w].max);
				printf(",\"mean_abs\":");
				json_number(st[w].mean_abs);
				printf(",\"rms\":");
				json_number(st[w].rms);
				printf(",\"top_channel\":%u,\"top_channel_mean_abs\":", st[w].top_channel);
				json_number(st[w].top_mean_abs);
				printf("}");
			}
			printf("}");
		} else {
			printf("%5u  %10.4g %10.4g %9.4g %9.4g %7u  %10.4g %10.4g %9.4g %9.4g %7u", l,
			    st[0].min, st[0].max, st[0].mean_abs, st[0].rms, st[0].top_channel,
			    st[1].min, st[1].max, st[1].mean_abs, st[1].rms, st[1].top_channel);
			if (s.meta.swa && win_of(&s, l))
				printf("  %6u", s.meta.swa);
			else if (s.meta.swa)
				printf("  %6s", "global");
			printf("\n");
		}
	}
	if (json)
		printf("]}\n");
	if (svg)
		write_svg(&s, svg, path, lo, hi - lo);
	free(chan);
	free(row);
	free(rows_of[0]);
	free(rows_of[1]);
	snapshot_close(&s);
	if (fflush(stdout) == EOF)
		die(1, "stdout:");
	return 0;
}
