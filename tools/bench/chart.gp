# SPDX-License-Identifier: GPL-2.0
#
# The chart of tools/bench/run: gnuplot -e "dir='build/bench'" chart.gp >SVG
# Left, every goal as measured / goal: a bar that stops short of the line
# is a goal met.  Right, each loop's time with each backend relative to
# no monitoring.  Reads dir/goals.dat ("label" measured/goal met
# "measured") and dir/chart.dat ("label" median min max), a line per item
# and kernel.

set terminal svg size 1400,900 dynamic font "sans,12" background "white"
set multiplot layout 1,2 margins 0.2,0.98,0.07,0.9 spacing 0.22,0 \
	title "ummunotify: goals and costs per kernel, from one run in a TCG guest" \
	font "sans,15"

set logscale x
set yrange [*:*] reverse
set ytics nomirror scale 0 font "sans,10"
set grid xtics lc rgb "#dddddd"
set style fill solid 0.85 noborder
set key off
at_least(x, lo) = x < lo ? lo : x
at_most(x, hi) = x > hi ? hi : x

set title "Goals: measured / goal (green: met)"
set xrange [0.01:100]
set xlabel "measured / goal"
set arrow 1 from 1, graph 0 to 1, graph 1 nohead lw 2 dt 2 lc rgb "black"
plot dir."/goals.dat" using (1):0:(0.01):(at_least($2, 0.011)): \
	($0 - 0.4):($0 + 0.4):($3 != 0 ? 0x2e7d32 : 0xc62828):ytic(1) \
	with boxxyerror lc rgb variable, \
     '' using (at_least($2, 1) * 1.15):0:4 with labels left font "sans,9"

set title "Loops: time / no monitoring (line: spread)"
set xrange [0.5:100]
set xlabel "time relative to no monitoring"
set arrow 1 from 1.15, graph 0 to 1.15, graph 1 nohead lw 2 dt 2 lc rgb "black"
set label 1 "goal for ummunotify: 1.15" at 1.15, graph 1.015 center font "sans,10"
color(s) = strstrt(s, "native") ? 0x1565c0 : strstrt(s, "legacy") ? 0x64b5f6 : \
	   strstrt(s, "uffd") ? 0xef6c00 : 0x8d6e63
plot dir."/chart.dat" using (1):0:(0.5):(at_least($2, 0.51)): \
	($0 - 0.4):($0 + 0.4):(color(strcol(1))):ytic(1) \
	with boxxyerror lc rgb variable, \
     '' using 2:0:3:4 with xerrorbars pt 0 lc rgb "black", \
     '' using (at_most(at_least($4, 1.15) * 1.1, 50)):0:(sprintf("%.2fx", $2)) \
	with labels left font "sans,9"
unset multiplot
