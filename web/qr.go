package web

import (
	"html/template"
	"strconv"
	"strings"

	qrcode "github.com/skip2/go-qrcode"
)

// qrSVG draws text (an otpauth:// URL) as a QR code in inline SVG: one
// path of unit squares, drawn by the server, so the page needs no script
// and no image from elsewhere. "" when the text does not fit a QR code.
func qrSVG(text string) template.HTML {
	q, err := qrcode.New(text, qrcode.Medium)
	if err != nil {
		return ""
	}
	bits := q.Bitmap() // includes the quiet zone
	n := len(bits)
	var b strings.Builder
	b.WriteString(`<svg class="qr" role="img" aria-label="QR code of the setup link" viewBox="0 0 `)
	b.WriteString(strconv.Itoa(n) + " " + strconv.Itoa(n))
	b.WriteString(`" shape-rendering="crispEdges"><title>QR code of the setup link</title><rect width="100%" height="100%" fill="#fff"/><path fill="#000" d="`)
	for y, row := range bits {
		for x, on := range row {
			if on {
				b.WriteString("M" + strconv.Itoa(x) + " " + strconv.Itoa(y) + "h1v1h-1z")
			}
		}
	}
	b.WriteString(`"/></svg>`)
	// Only digits and fixed markup: nothing of text is written out.
	return template.HTML(b.String())
}
