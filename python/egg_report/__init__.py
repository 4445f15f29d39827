"""egg's suite report: DIR/report.html from DIR/results.json (`egg bench`), one self-contained page with
matplotlib charts inlined as SVG. Imports neither torch nor triton."""
