# chart.awk: a self-contained SVG line chart from lines "SERIES<TAB>X<TAB>Y".
# Variables: title, xlabel, ylabel.  Usage: awk -f bench/chart.awk -v title=... data >out.svg
BEGIN { FS = "\t"; n = 0; ns = 0 }
{
	if (!($1 in sidx)) { sidx[$1] = ns; sname[ns++] = $1 }
	s = sidx[$1]; k = cnt[s]++
	px[s, k] = $2 + 0; py[s, k] = $3 + 0
	if (n == 0 || $2 + 0 > xmax) xmax = $2 + 0
	if (n == 0 || $3 + 0 > ymax) ymax = $3 + 0
	n++
}
function nice(v,    p, f) {	# a round number at or above v
	p = 1; while (p * 10 <= v) p *= 10
	f = v / p
	return (f <= 1 ? 1 : f <= 1.5 ? 1.5 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 3 ? 3 : \
	    f <= 4 ? 4 : f <= 5 ? 5 : f <= 6 ? 6 : f <= 8 ? 8 : 10) * p
}
function X(v) { return L + v / xtop * W }
function Y(v) { return T + H - v / ytop * H }
END {
	L = 70; T = 40; W = 620; H = 340
	split("#1f77b4 #d62728 #2ca02c #9467bd #ff7f0e #8c564b #17becf", col, " ")
	xtop = nice(xmax); ytop = nice(ymax * 1.05)
	printf "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	printf "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">\n", L + W + 270, T + H + 60
	printf "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
	printf "<text x=\"%d\" y=\"22\" font-size=\"14\">%s</text>\n", L, title
	for (i = 0; i <= 5; i++) {
		yv = ytop * i / 5; xv = xtop * i / 5
		printf "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L, Y(yv), L + W, Y(yv)
		printf "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", L - 6, Y(yv) + 4, yv
		printf "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"black\"/>\n", X(xv), T + H, X(xv), T + H + 5
		printf "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", X(xv), T + H + 18, xv
	}
	printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", L, T + H, L + W, T + H
	printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", L, T, L, T + H
	printf "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", L + W / 2, T + H + 40, xlabel
	printf "<text x=\"18\" y=\"%.1f\" transform=\"rotate(-90 18 %.1f)\" text-anchor=\"middle\">%s</text>\n", T + H / 2, T + H / 2, ylabel
	for (s = 0; s < ns; s++) {
		c = col[s % 7 + 1]
		printf "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", c
		for (k = 0; k < cnt[s]; k++) printf "%.1f,%.1f ", X(px[s, k]), Y(py[s, k])
		printf "\"/>\n"
		for (k = 0; k < cnt[s]; k++)
			printf "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", X(px[s, k]), Y(py[s, k]), c
		printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"/>\n", L + W + 15, T + 10 + 20 * s, L + W + 35, T + 10 + 20 * s, c
		gsub(/&/, "\\&amp;", sname[s]); gsub(/</, "\\&lt;", sname[s])
		printf "<text x=\"%d\" y=\"%d\">%s</text>\n", L + W + 40, T + 14 + 20 * s, sname[s]
	}
	printf "</svg>\n"
}
