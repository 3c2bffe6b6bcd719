package geo

import (
	"math"

	"github.com/oschwald/maxminddb-golang/v2/mmdbdata"
)

// Hand-written cursor decoders instead of reflection into a tagged struct:
// they read only the few keys dmarcd shows, pick the English name without
// building the "names" map, and so a lookup allocates nothing but its result.
// The library's own Skip bounds the work spent on keys we do not want.

// locationRecord is what a City or Country record gives dmarcd.
type locationRecord struct {
	countryCode, countryName, city string
	latitude, longitude            float64
	hasLatitude, hasLongitude      bool
}

// UnmarshalMaxMindDBCursor decodes the top-level map of a City/Country record.
func (l *locationRecord) UnmarshalMaxMindDBCursor(c mmdbdata.Cursor) (mmdbdata.Cursor, error) {
	return eachKey[locationRecord](c, func(key []byte, v mmdbdata.Cursor) (mmdbdata.Cursor, error) {
		switch string(key) {
		case "country":
			return l.decodeCountry(v)
		case "city":
			return eachKey[locationRecord](v, func(key []byte, v mmdbdata.Cursor) (mmdbdata.Cursor, error) {
				if string(key) == "names" {
					return englishName(v, &l.city)
				}
				return v.Skip()
			})
		case "location":
			return l.decodeLocation(v)
		}
		return v.Skip()
	})
}

func (l *locationRecord) decodeCountry(c mmdbdata.Cursor) (mmdbdata.Cursor, error) {
	return eachKey[locationRecord](c, func(key []byte, v mmdbdata.Cursor) (mmdbdata.Cursor, error) {
		switch string(key) {
		case "iso_code":
			return readString(v, &l.countryCode)
		case "names":
			return englishName(v, &l.countryName)
		}
		return v.Skip()
	})
}

func (l *locationRecord) decodeLocation(c mmdbdata.Cursor) (mmdbdata.Cursor, error) {
	return eachKey[locationRecord](c, func(key []byte, v mmdbdata.Cursor) (mmdbdata.Cursor, error) {
		switch string(key) {
		case "latitude":
			return readFloat(v, &l.latitude, &l.hasLatitude)
		case "longitude":
			return readFloat(v, &l.longitude, &l.hasLongitude)
		}
		return v.Skip()
	})
}

// asnRecord is what an ASN or ISP record gives dmarcd; both database types
// use the same two keys.
type asnRecord struct {
	number uint32
	org    string
}

// UnmarshalMaxMindDBCursor decodes the top-level map of an ASN/ISP record.
func (a *asnRecord) UnmarshalMaxMindDBCursor(c mmdbdata.Cursor) (mmdbdata.Cursor, error) {
	return eachKey[asnRecord](c, func(key []byte, v mmdbdata.Cursor) (mmdbdata.Cursor, error) {
		switch string(key) {
		case "autonomous_system_number":
			n, next, err := v.ReadUint()
			if err != nil {
				return mmdbdata.Cursor{}, mmdbdata.NormalizeUnmarshalError[uint32](err)
			}
			if n > math.MaxUint32 {
				return mmdbdata.Cursor{}, mmdbdata.NewUnmarshalTypeError[uint32](n)
			}
			a.number = uint32(n)
			return next, nil
		case "autonomous_system_organization":
			return readString(v, &a.org)
		}
		return v.Skip()
	})
}

// eachKey calls fn for every entry of the map at c; fn must consume the
// value and return its successor. T names the Go type in type errors.
func eachKey[T any](c mmdbdata.Cursor, fn func(key []byte, v mmdbdata.Cursor) (mmdbdata.Cursor, error)) (mmdbdata.Cursor, error) {
	entries, err := c.Map()
	if err != nil {
		return mmdbdata.Cursor{}, mmdbdata.NormalizeUnmarshalError[T](err)
	}
	var next mmdbdata.Cursor
	for {
		key, v, ok := entries.Next(next)
		if !ok {
			break
		}
		if next, err = fn(key, v); err != nil {
			return mmdbdata.Cursor{}, err
		}
	}
	return entries.End()
}

// englishName stores the "en" entry of a names map in dst, if there is one.
func englishName(c mmdbdata.Cursor, dst *string) (mmdbdata.Cursor, error) {
	return eachKey[map[string]string](c, func(key []byte, v mmdbdata.Cursor) (mmdbdata.Cursor, error) {
		if string(key) == "en" {
			return readString(v, dst)
		}
		return v.Skip()
	})
}

func readString(c mmdbdata.Cursor, dst *string) (mmdbdata.Cursor, error) {
	s, next, err := c.ReadString()
	if err != nil {
		return mmdbdata.Cursor{}, mmdbdata.NormalizeUnmarshalError[string](err)
	}
	*dst = s
	return next, nil
}

func readFloat(c mmdbdata.Cursor, dst *float64, ok *bool) (mmdbdata.Cursor, error) {
	f, next, err := c.ReadFloat()
	if err != nil {
		return mmdbdata.Cursor{}, mmdbdata.NormalizeUnmarshalError[float64](err)
	}
	*dst, *ok = f, true
	return next, nil
}
