/* SPDX-License-Identifier: MIT */
/*
 * html_assets.S - the script and the style of mt-report --html's page
 * (lib/report/html_page.js, html_page.css), built into mt-report so that
 * the page it writes needs nothing else: kept as files of their own so
 * they can be read, linted and edited as what they are.  Paths are from
 * the top of the source tree, where make runs.
 */
	.section .rodata
	.globl mt_html_js
	.globl mt_html_js_end
	.globl mt_html_css
	.globl mt_html_css_end
mt_html_js:
	.incbin "lib/report/html_page.js"
mt_html_js_end:
mt_html_css:
	.incbin "lib/report/html_page.css"
mt_html_css_end:

	.section .note.GNU-stack,"",@progbits
