"""Scrapy's side of `crawlfleet bench crawl`: a CrawlSpider that follows every link on the
synthetic web's hosts, obeying robots.txt, and writes what it did as JSON.

    python -m scrapy runspider bench_crawl_spider.py \
        -a start=http://127.77.0.1:8080/ -a hosts=127.77.0.1:8080,127.77.0.2:8080 -a out=scrapy.json \
        -s CLOSESPIDER_TIMEOUT=10

The JSON: {"pages": responses parsed (robots.txt excluded), "seconds": from the spider's start
to the last response parsed, "reason": why the spider closed}. crawlfleet embeds this file
(include_str!) and writes it next to the web it serves, so the binary needs no checkout.
"""

import json
import time

from scrapy import signals
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule


class SynthwebSpider(CrawlSpider):
    name = "synthweb"
    custom_settings = {
        "ROBOTSTXT_OBEY": True,
        "CONCURRENT_REQUESTS": 64,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 8,
        "DOWNLOAD_DELAY": 0,
        "AUTOTHROTTLE_ENABLED": False,
        "LOG_LEVEL": "WARNING",
        "TELNETCONSOLE_ENABLED": False,
    }

    def __init__(self, start="", hosts="", out="", *args, **kwargs):
        self.start_urls = [start]
        # `hosts` are address:port; the link extractor compares a URL's host with its port,
        # the offsite middleware without.
        netlocs = [h for h in hosts.split(",") if h]
        self.allowed_domains = sorted({h.rsplit(":", 1)[0] for h in netlocs})
        # Set before CrawlSpider.__init__, which compiles the rules.
        self.rules = (
            Rule(
                LinkExtractor(allow_domains=netlocs),
                callback="parse_page",
                follow=True,
            ),
        )
        super().__init__(*args, **kwargs)
        self.out = out
        self.pages = 0
        self.first = None
        self.last = None

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.opened, signal=signals.spider_opened)
        return spider

    def opened(self, spider):
        self.first = time.monotonic()

    def count(self):
        self.pages += 1
        self.last = time.monotonic()

    def parse_start_url(self, response):
        self.count()
        return []

    def parse_page(self, response):
        self.count()
        return []

    def closed(self, reason):
        first = self.first or time.monotonic()
        seconds = (self.last or first) - first
        with open(self.out, "w") as f:
            json.dump({"pages": self.pages, "seconds": seconds, "reason": reason}, f)
