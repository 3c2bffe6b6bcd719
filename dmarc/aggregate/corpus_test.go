package aggregate

import "testing"

// aggCorpusDir is the corpus copied from parsedmarc (see its README.md).
const aggCorpusDir = "../../testdata/corpus"

// aggCorpusFile is one aggregate-bearing corpus file with the counts the
// corpus README lists for it.
type aggCorpusFile struct {
	path    string
	records int
	msgs    int64
}

func aggCorpusFiles(tb testing.TB) []aggCorpusFile {
	tb.Helper()
	return []aggCorpusFile{
		{"_removed_from_head/aggregate/zoho.com!example.com!1581753600!1581840000.xml", 8, 9},
		{"aggregate/!example.com!1538204542!1538463818.xml", 1, 1},
		{"aggregate/!large-example.com!1711897200!1711983600.xml", 2286, 2286},
		{"aggregate/Report domain- borschow.com Submitter- google.com Report-ID- 949348866075514174.eml", 1, 1},
		{"aggregate/addisonfoods.com!example.com!1536105600!1536191999.xml", 1, 1},
		{"aggregate/empty_reason.xml", 1, 2},
		{"aggregate/estadocuenta1.infonacot.gob.mx!example.com!1536853302!1536939702!2940.xml.zip", 1, 1},
		{"aggregate/example.net!example.com!1529366400!1529452799.xml", 1, 1},
		{"aggregate/fastmail.com!example.com!1516060800!1516147199!102675056.xml.gz", 1, 1},
		// The README's counts for the three broken files are regex counts
		// (1 record) with no message sum; we recover the one record and its
		// count of 1.
		{"aggregate/ikea.com!example.de!1538690400!1538776800.xml", 1, 1},
		{"aggregate/invalid_utf_8.xml", 1, 1},
		{"aggregate/invalid_xml.xml", 1, 1},
		{"aggregate/mimecast-weird-gzip.eml", 1, 1},
		{"aggregate/old_draft_from_wiki.xml", 1, 2},
		{"aggregate/protection.outlook.com!example.com!1711756800!1711843200.xml", 1, 1},
		{"aggregate/rfc9990-example.net!example.com!1700000000!1700086399.xml", 2, 7},
		{"aggregate/rfc9990-sample.xml", 1, 123},
		{"aggregate/twilight.eml", 1, 1},
		{"aggregate/usssa.com!example.com!1538784000!1538870399.xml", 2, 2},
		{"aggregate/veeam.com!example.com!1530133200!1530219600.xml", 1, 1},
		{"aggregate_invalid/report_with_upper_cased_pass.xml", 1, 1},
		{"extract_report/changed-input.xml", 20, 3047},
		{"extract_report/nice-input.xml", 20, 3047},
		{"extract_report/nice-input.xml.gz", 20, 3047},
		{"extract_report/nice-input.xml.zip", 20, 3047},
	}
}
