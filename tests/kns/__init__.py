"""Local HTTPS simulator of CNKI (kns/navi/bar/login/www.cnki.net) for tests and headed demos."""

from .corpus import Corpus, Journal, Paper, build_corpus
from .server import Fault, KnsSimulator, Scenario, SimRequest

__all__ = ["Corpus", "Fault", "Journal", "KnsSimulator", "Paper", "Scenario", "SimRequest", "build_corpus"]
