"""Deterministic invented corpus for the CNKI simulator.

Everything here is made up (names, journals, numbers) but shaped like CNKI data:
journal articles (some 网络首发), doctoral and master theses, conference papers,
newspaper articles, books and a few English-language papers.  The same seed always
yields the same corpus, so tests can compute expected answers from it.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Journal:
    key: str  # pykm, e.g. FXPL
    name: str
    name_en: str = ""
    tiers: tuple[str, ...] = ()
    composite: float | None = None
    aggregate: float | None = None
    metric_year: int | None = 2025
    former: tuple[str, ...] = ()
    sponsor: str = ""
    issn: str = ""
    cn: str = ""
    period: str = "月刊"
    kind: str = "journal"  # journal | university | conference | newspaper | publisher
    level: str = ""  # newspapers: 中央级 / 地方级
    duplicate_metrics: bool = False  # the page repeats the impact line (ambiguous on purpose)


@dataclass
class Section:
    level: int
    title: str
    paragraphs: list[str]


@dataclass
class Paper:
    idx: int
    filename: str
    dbcode: str  # product code shown as data-dbname in grid rows: CJFQ, CAPJ, CDFD ...
    table: str  # table name, e.g. CJFDLAST2024
    resource: str  # JOURNAL, DISSERTATION, CONFERENCE, NEWSPAPER, BOOK
    doc_type: str  # 期刊 / 博士 / 硕士 / 会议 / 报纸 / 图书
    title: str
    authors: list[str]
    institutions: list[str]
    author_orgs: list[list[int]]  # 1-based institution numbers per author
    source: str
    source_key: str
    year: int
    date: str  # YYYY-MM-DD, or YYYY-MM-DD HH:MM for online-first rows
    abstract: str
    keywords: list[str]
    language: str = "zh"
    title_en: str = ""
    subtitle: str = ""
    corresponding: str = ""
    volume: str = ""
    issue: str = ""
    pages: str = ""
    page_count: int = 0
    funds: list[str] = field(default_factory=list)
    doi: str = ""
    clc: list[str] = field(default_factory=list)
    cited: int = 0
    downloads: int = 0
    online_first: bool = False
    online_first_time: str = ""
    supervisor: str = ""
    major: str = ""
    conference: str = ""
    conference_place: str = ""
    conference_date: str = ""
    edition_name: str = ""
    edition_no: str = ""
    isbn: str = ""
    publisher: str = ""
    free: bool = False
    size_k: int = 0
    sections: list[Section] = field(default_factory=list)
    references: list[str] = field(default_factory=list)
    author_codes: list[str] = field(default_factory=list)  # the person (author page) behind each author
    _lowered: dict[str, list[str]] = field(default_factory=dict, repr=False, compare=False)

    @property
    def first_author(self) -> str:
        return self.authors[0] if self.authors else ""

    @property
    def is_journal(self) -> bool:
        return self.resource == "JOURNAL"

    def fulltext(self) -> str:
        parts = [self.title, self.abstract]
        for s in self.sections:
            parts.append(s.title)
            parts.extend(s.paragraphs)
        return "\n".join(parts)

    def lowered(self, code: str) -> list[str]:
        """field_values(code), lowercased and cached (the grid searches the corpus on every request)."""
        if code not in self._lowered:
            self._lowered[code] = [t.lower() for t in self.field_values(code) if t]
        return self._lowered[code]

    def field_values(self, code: str) -> list[str]:
        """Texts a QueryJson field code searches in."""
        if code == "TI":
            return [self.title, self.title_en]
        if code == "KY":
            return list(self.keywords)
        if code == "AB":
            return [self.abstract]
        if code in ("SU", "TKA"):
            return [self.title, self.title_en, self.abstract, *self.keywords]
        if code == "AU":
            return list(self.authors)
        if code == "FI":
            return [self.first_author]
        if code == "RP":
            return [self.corresponding] if self.corresponding else []
        if code in ("AF", "FAF"):
            return list(self.institutions) if code == "AF" else self.institutions[:1]
        if code == "LY":
            return [self.source]
        if code == "DOI":
            return [self.doi] if self.doi else []
        if code == "FU":
            return list(self.funds)
        if code == "FT":
            return [self.fulltext()]
        if code == "RF":
            return list(self.references)
        if code == "CLC":
            return list(self.clc)
        if code in ("ST", "CO"):
            return [s.title for s in self.sections] + ([self.subtitle] if self.subtitle else [])
        if code == "TU":
            return [self.supervisor] if self.supervisor else []
        if code == "XF":
            return [self.major] if self.major else []
        if code == "AUC":
            return list(self.author_codes)
        return []


JOURNALS: tuple[Journal, ...] = (
    Journal("FXPL", "法学评论", "Law Review", ("北大核心", "AMI核心", "CSSCI"), 9.597, 4.913, 2025,
            (), "武汉大学", "1004-1303", "42-1090/D", "双月刊"),
    Journal("ZGFX", "中国法学前沿", "Frontiers of Chinese Law", ("CSSCI", "北大核心", "AMI顶级"), 12.31, 6.882, 2025,
            ("法学前沿", "政法研究通讯"), "中国法学研究会", "1003-1707", "11-1030/D", "双月刊"),
    Journal("BJFX", "比较法研究季刊", "Journal of Comparative Law", ("CSSCI",), 5.204, 2.731, 2024,
            (), "东华政法大学", "1004-8561", "31-1201/D", "季刊"),
    Journal("KFDX", "开放大学学报", "Journal of Open University", ("AMI入库",), 1.083, 0.512, 2025,
            ("开放大学学报", "广播电视大学学报", "电大学刊"), "国家开放大学", "1008-9748", "11-3915/G4", "双月刊"),
    Journal("JSJY", "计算机研究与应用", "Computer Research and Application", ("北大核心", "CSCD", "EI", "AMI核心"),
            4.832, 2.315, 2025, (), "中国计算技术学会", "1000-1239", "11-1777/TP"),
    Journal("RJXB", "软件工程学报", "Journal of Software Engineering", ("北大核心", "CSCD", "EI"), 6.011, 3.027, 2025,
            ("软件学刊",), "中国软件协会", "1000-9825", "11-2560/TP"),
    Journal("ZNXT", "智能系统学报", "CAAI Transactions on Intelligent Systems", ("北大核心", "CSCD"), 3.305, 1.744, 2025,
            (), "智能科学学会", "1673-4785", "23-1538/TP", "双月刊"),
    Journal("XXZY", "信息资源管理学报", "Journal of Information Resources Management", ("CSSCI", "AMI扩展"), 7.448, 4.002, 2025,
            (), "东湖大学", "2095-2171", "42-1812/G2", "双月刊"),
    Journal("TSQB", "图书情报知识", "Documentation, Information & Knowledge", ("CSSCI", "北大核心"), 5.61, 3.02, 2024,
            (), "东湖大学", "1003-2797", "42-1085/G2", "双月刊", duplicate_metrics=True),
    Journal("ZHYX", "中华临床医学杂志", "Chinese Journal of Clinical Medicine", ("北大核心", "CSCD", "AMI核心"), 2.918, 1.622, 2025,
            (), "中华临床医学会", "0254-6450", "11-2137/R"),
    Journal("YXYX", "医学影像进展", "Progress in Medical Imaging", ("统计源期刊",), None, None, None,
            (), "华南医科大学", "1672-0512", "44-1511/R"),
    Journal("JJYJ", "经济研究评论", "Economic Research Review", ("CSSCI", "北大核心", "AMI顶级"), 15.702, 8.913, 2025,
            ("经济评论",), "国家经济研究院", "0577-9154", "11-1081/F"),
    Journal("CJKX", "财经科学研究", "Finance and Economics Research", ("CSSCI", "北大核心"), 6.455, 3.118, 2025,
            (), "西南财经学院", "1000-8306", "51-1104/F"),
    Journal("JYYJ", "教育技术研究", "Educational Technology Research", ("CSSCI", "北大核心", "AMI核心"), 8.004, 4.471, 2025,
            ("电化教育研究通讯",), "西北师范学院", "1003-1553", "62-1022/G4"),
    Journal("STXB", "生态学研究", "Acta Ecologica Research", ("北大核心", "CSCD", "AMI核心"), 5.877, 3.512, 2025,
            (), "中国生态学会", "1000-0933", "11-2031/Q", "半月刊"),
    Journal("SCIS", "中国科学：信息科学（英文版）", "Science China Information Sciences", ("SCI", "EI", "CSCD"), 4.105, 2.233, 2025,
            (), "中国科学院", "1674-733X", "11-5847/TP"),
    Journal("CLWL", "材料与物理快报", "Materials and Physics Letters", (), None, None, None,
            (), "华东材料研究所", "1002-4956", "31-1100/O"),
)

UNIVERSITIES: tuple[Journal, ...] = (
    Journal("GBJUNI", "北江大学", kind="university"),
    Journal("GDHUNI", "东湖大学", kind="university"),
    Journal("GHZUNI", "华中理工大学", kind="university"),
    Journal("GXNUNI", "西南政法学院", kind="university"),
    Journal("GHSUNI", "湖滨师范大学", kind="university"),
    Journal("GZYUNI", "中原医科大学", kind="university"),
)

CONFERENCES: tuple[tuple[str, str, str, str], ...] = (
    # (proceedings name, conference name, place, date)
    ("第十九届全国信息检索学术会议论文集", "第十九届全国信息检索学术会议", "中国杭州", "2023-10-20"),
    ("2024年中国法学青年论坛论文集", "2024年中国法学青年论坛", "中国武汉", "2024-05-18"),
    ("第七届智能教育国际研讨会论文集", "第七届智能教育国际研讨会", "中国西安", "2022-11-05"),
    ("中国生态学大会2023论文摘要集", "中国生态学大会2023", "中国昆明", "2023-08-12"),
)

NEWSPAPERS: tuple[Journal, ...] = (
    Journal("BJRB", "滨江日报", kind="newspaper", level="地方级"),
    Journal("KJCX", "科技创新报", kind="newspaper", level="中央级"),
    Journal("HDJY", "华东教育报", kind="newspaper", level="地方级"),
)

PUBLISHERS: tuple[str, ...] = ("东湖大学出版社", "北江科学出版社", "法律知识出版社")

# topic: (english topic, keyword pool, clc codes, journals, majors)
TOPICS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...], str]] = {
    "违约金": ("liquidated damages", ("违约金", "损害赔偿", "合同法", "违约责任", "司法调整"), ("D923.6",),
             ("FXPL", "ZGFX", "BJFX"), "民商法学"),
    "个人信息保护": ("personal information protection", ("个人信息", "数据安全", "知情同意", "隐私权", "算法治理"),
                 ("D923", "D912.1"), ("FXPL", "ZGFX", "XXZY"), "宪法学与行政法学"),
    "自动驾驶": ("autonomous driving", ("自动驾驶", "产品责任", "风险分配", "算法责任", "交通事故"), ("D923.8", "U463.6"),
             ("ZGFX", "BJFX", "ZNXT"), "经济法学"),
    "大语言模型": ("large language models", ("大语言模型", "生成式人工智能", "提示工程", "知识增强", "幻觉"),
              ("TP18", "TP391.1"), ("JSJY", "RJXB", "ZNXT", "SCIS"), "计算机应用技术"),
    "检索增强生成": ("retrieval-augmented generation", ("检索增强生成", "向量检索", "知识图谱", "问答系统", "大语言模型"),
                ("TP391.3", "TP18"), ("JSJY", "XXZY", "TSQB", "RJXB"), "情报学"),
    "知识图谱": ("knowledge graph", ("知识图谱", "实体链接", "关系抽取", "图神经网络", "语义检索"), ("TP391.1", "G250.7"),
             ("XXZY", "TSQB", "JSJY"), "图书情报"),
    "糖尿病": ("diabetes", ("2型糖尿病", "血糖控制", "胰岛素抵抗", "并发症", "随机对照试验"), ("R587.1",),
            ("ZHYX", "YXYX"), "内科学"),
    "医学影像": ("medical imaging", ("医学影像", "深度学习", "图像分割", "计算机辅助诊断", "CT"), ("R445", "TP391.41"),
             ("YXYX", "ZHYX", "JSJY"), "影像医学与核医学"),
    "数字经济": ("digital economy", ("数字经济", "全要素生产率", "产业结构", "数字化转型", "区域差异"), ("F49", "F124"),
             ("JJYJ", "CJKX"), "产业经济学"),
    "绿色金融": ("green finance", ("绿色金融", "碳排放", "环境规制", "企业融资", "双重差分"), ("F832", "X196"),
             ("CJKX", "JJYJ"), "金融学"),
    "在线教育": ("online education", ("在线教育", "学习投入", "混合式教学", "教师专业发展", "教育公平"), ("G434", "G642"),
             ("JYYJ", "KFDX"), "教育技术学"),
    "湿地生态": ("wetland ecology", ("湿地", "生态系统服务", "生物多样性", "景观格局", "碳汇"), ("Q149", "X171"),
             ("STXB",), "生态学"),
}

ASPECTS = ("理论基础", "规范路径", "实证检验", "比较考察", "制度完善", "风险防控", "演进逻辑", "评价体系", "影响机制",
           "治理框架", "技术路线", "应用场景", "困境与出路", "国际经验", "优化策略")
PATTERNS = ("{t}的{a}研究", "论{t}的{a}", "{t}{a}：基于{c}的分析", "{c}视角下{t}的{a}", "{t}中的{a}问题探析",
            "面向{c}的{t}{a}", "{t}的{a}与展望", "新时代{t}{a}的再思考")
CONTEXTS = ("数字时代", "典型案例", "省级面板数据", "多源数据", "司法裁判文书", "问卷调查", "深度学习", "文本挖掘",
            "比较法", "高质量发展", "双碳目标", "教育数字化")
SURNAMES = "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈姚卢"
GIVEN = "伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚桂英华玉兰建国志红雪梅晓东海燕立新文博宇欣怡子涵浩然思远"
ORGS = ("北江大学法学院", "东湖大学信息管理学院", "华中理工大学计算机学院", "西南政法学院民商法学院", "湖滨师范大学教育学部",
        "中原医科大学附属第一医院", "国家经济研究院", "中国科学院计算技术研究所", "北江大学经济学院", "东湖大学生命科学学院",
        "华东材料研究所", "西南财经学院金融学院")
FUNDERS = ("国家社会科学基金项目", "国家自然科学基金项目", "教育部人文社会科学研究项目", "中国博士后科学基金资助项目",
           "国家重点研发计划项目")

EN_TITLES = (
    "A Survey of Retrieval-Augmented Generation for Knowledge-Intensive Tasks",
    "Graph Neural Networks for Entity Linking in Chinese Scholarly Data",
    "Hallucination Detection in Large Language Models: Benchmarks and Methods",
    "Efficient Vector Search with Product Quantization on Edge Devices",
    "Learning to Rank Scientific Papers with Citation-Aware Signals",
    "Robust Medical Image Segmentation under Domain Shift",
    "C++ Template Metaprogramming for High-Performance Numerical Kernels",
    "Federated Learning with Differential Privacy for Clinical Records",
)

# English titles of two Chinese journal papers (see _add_special_cases).
TRANSLATED_TITLES = (
    "Pathways and Constraints Reconsidered: Evidence from Judicial Practice",
    "Mechanisms and Regional Disparities Revisited with Provincial Panels",
)


def _name(rng: random.Random) -> str:
    return rng.choice(SURNAMES) + "".join(rng.choice(GIVEN) for _ in range(rng.choice((1, 2))))


def _en_name(rng: random.Random) -> str:
    first = rng.choice(("Wei", "Fang", "Lei", "Min", "Jie", "Hao", "Yu", "Xin", "Tao", "Ying"))
    last = rng.choice(("Wang", "Li", "Zhang", "Liu", "Chen", "Yang", "Huang", "Zhao", "Wu", "Zhou"))
    return f"{last} {first}"


def _sections(rng: random.Random, topic: str, kws: list[str], title: str) -> list[Section]:
    heads = ["一、问题的提出", "二、{t}的理论基础", "三、{t}的现状与困境", "四、{t}的完善路径", "五、结论"]
    out: list[Section] = []
    for i, h in enumerate(heads):
        head = h.format(t=topic)
        paras = []
        for j in range(2 if i in (0, 4) else 3):
            kw = kws[(i + j) % len(kws)]
            paras.append(
                f"围绕“{title}”这一主题，本部分从{kw}切入，结合{rng.choice(CONTEXTS)}进行讨论。"
                f"研究表明，{topic}与{kw}之间存在稳定而复杂的联系，既需要在规范层面厘清边界，"
                f"也需要在实践层面回应{rng.choice(ASPECTS)}的要求。"
            )
        out.append(Section(1, head, paras))
        if i in (2, 3):
            for k in range(2):
                sub = f"（{'一二'[k]}）{kws[(i + k + 1) % len(kws)]}的{rng.choice(ASPECTS)}"
                out.append(Section(2, sub, [
                    f"就{kws[(i + k + 1) % len(kws)]}而言，{topic}在{rng.choice(CONTEXTS)}中呈现出新的特点，"
                    f"相关主体的权利义务配置仍有待细化，本文对此提出具体建议。"
                ]))
    return out


@dataclass
class Person:
    """One author as CNKI's author page knows them: a code, a name, the institutions they wrote at (in the
    order they first did) and their papers."""

    code: str
    name: str
    institutions: list[str]
    papers: list[Paper]


@dataclass
class Corpus:
    papers: list[Paper]
    journals: dict[str, Journal]

    def by_filename(self, filename: str) -> Paper | None:
        return self._files.get(filename.upper())

    def journal(self, key: str) -> Journal | None:
        return self.journals.get(key)

    def __post_init__(self) -> None:
        self._files = {p.filename.upper(): p for p in self.papers}
        self.people = _people(self.papers)

    def add(self, paper: Paper) -> None:
        self.papers.append(paper)
        self._files[paper.filename.upper()] = paper

    def withdraw(self, paper: Paper) -> None:
        self.papers.remove(paper)
        self._files.pop(paper.filename.upper(), None)

    def __len__(self) -> int:
        return len(self.papers)


def build_corpus(size: int = 360, seed: int = 20261130) -> Corpus:
    """Build the corpus; `size` papers, deterministic for a given seed."""
    rng = random.Random(seed)
    journals = {j.key: j for j in (*JOURNALS, *UNIVERSITIES, *NEWSPAPERS)}
    topics = list(TOPICS)
    titles: set[str] = set()
    papers: list[Paper] = []
    kinds = (["J"] * 52 + ["F"] * 8 + ["D"] * 8 + ["M"] * 12 + ["C"] * 8 + ["N"] * 6 + ["B"] * 2 + ["E"] * 4)
    seq: dict[str, int] = {}
    for idx in range(size):
        kind = kinds[idx % len(kinds)] if idx >= 8 else "JJJJFDMC"[idx]
        topic = topics[idx % len(topics)]
        topic_en, pool, clcs, jkeys, major = TOPICS[topic]
        kws = rng.sample(pool, k=rng.randint(3, len(pool)))
        if kind == "E":
            title = EN_TITLES[(idx // len(kinds)) % len(EN_TITLES)]
            if title in titles:
                title = f"{title}: Evidence from {rng.choice(('Chinese Journals', 'Open Benchmarks', 'Field Data'))}"
        else:
            for _ in range(50):
                title = rng.choice(PATTERNS).format(t=topic, a=rng.choice(ASPECTS), c=rng.choice(CONTEXTS))
                if title not in titles:
                    break
            else:
                title = f"{topic}研究（{idx}）"
        titles.add(title)
        year = 2014 + rng.randint(0, 12)
        month, day = rng.randint(1, 12), rng.randint(1, 28)
        date = f"{year:04d}-{month:02d}-{day:02d}"
        n_auth = {"D": 1, "M": 1, "N": 1, "B": 2}.get(kind, rng.randint(1, 4))
        authors = [(_en_name(rng) if kind == "E" else _name(rng)) for _ in range(n_auth)]
        orgs = rng.sample(ORGS, k=min(len(authors), rng.randint(1, 2)))
        author_orgs = [[1 + (i % len(orgs))] for i in range(len(authors))]
        cited = int(rng.paretovariate(1.3) * 3) - 3 if rng.random() > 0.15 else 0
        downloads = int(rng.paretovariate(1.1) * 120) + cited * 7
        if idx % 97 == 5:
            cited, downloads = 12000 + idx, 160000 + idx  # large counts render as 万 / thousands separators
        abstract = (
            f"{title}是当前{major}领域关注的重要问题。本文以{'、'.join(kws[:3])}为线索，"
            f"综合运用{rng.choice(CONTEXTS)}与文献分析等方法，系统考察了{topic}的{rng.choice(ASPECTS)}。"
            f"研究发现：{kws[0]}对{topic}具有显著影响，{kws[-1]}在其中发挥中介作用。"
            f"据此，本文从{rng.choice(ASPECTS)}与{rng.choice(ASPECTS)}两个方面提出了对策建议。"
        )
        if kind == "E":
            abstract = (f"This paper studies {topic_en}. We review {', '.join(kws[:2])} and propose a framework "
                        f"evaluated on {rng.choice(('three', 'five', 'seven'))} benchmarks. Results show consistent gains.")
        funds = [f"{rng.choice(FUNDERS)}（{rng.randint(18, 24)}{rng.choice('ABCY')}{rng.randint(100, 999)}）"] \
            if rng.random() < 0.55 else []
        clc = list(rng.sample(clcs, k=rng.randint(1, len(clcs))))
        refs = [f"{_name(rng)}.{rng.choice(list(TOPICS))}的{rng.choice(ASPECTS)}[J].{rng.choice(JOURNALS).name},"
                f"{rng.randint(2005, year)}({rng.randint(1, 12)}):{rng.randint(1, 90)}-{rng.randint(91, 160)}."
                for _ in range(rng.randint(3, 8))]
        common = dict(idx=idx, title=title, authors=authors, institutions=list(orgs), author_orgs=author_orgs,
                      year=year, date=date, abstract=abstract, keywords=kws, funds=funds, clc=clc, cited=max(cited, 0),
                      downloads=downloads, references=refs, size_k=rng.randint(300, 4200),
                      corresponding=authors[-1] if len(authors) > 1 else "", free=rng.random() < 0.06)
        if kind in ("J", "F", "E"):
            j = journals["SCIS"] if kind == "E" else journals[rng.choice(jkeys)]
            first = rng.randint(1, 150)
            pc = rng.randint(6, 20)
            issue = f"{rng.randint(1, 12):02d}"
            key = f"{j.key}{year}{issue}"
            seq[key] = seq.get(key, 0) + 1
            p = Paper(filename=f"{key}{seq[key]:03d}", dbcode="CJFQ", table=f"CJFDLAST{year}", resource="JOURNAL",
                      doc_type="期刊", source=j.name, source_key=j.key, volume=str(year - 1980) if rng.random() < 0.5 else "",
                      issue=str(int(issue)), pages=f"{first}-{first + pc - 1}", page_count=pc,
                      doi=f"10.{rng.randint(13000, 16999)}/j.cnki.{j.key.lower()}.{year}.{issue}.{seq[key]:03d}"
                      if rng.random() < 0.7 else "", **common)
            if kind == "E":
                p.language = "en"
                p.doi = f"10.1007/s11432-{year % 100:02d}{rng.randint(1000, 9999)}-x"
            if kind == "F":
                p.year = 2026
                p.online_first = True
                p.dbcode, p.table = "CAPJ", "CAPJLAST"
                p.online_first_time = f"2026-{month:02d}-{day:02d} {rng.randint(8, 20):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
                p.date = p.online_first_time[:16]
                p.filename = f"{j.key}2026{month:02d}{day:02d}{idx:03d}"
                p.volume = p.issue = p.pages = ""
                p.cited = 0
            papers.append(p)
        elif kind in ("D", "M"):
            uni = rng.choice(UNIVERSITIES)
            doctoral = kind == "D"
            p = Paper(filename=f"10{rng.randint(22, 26)}{rng.randint(100000, 999999)}.nh",
                      dbcode="CDFD" if doctoral else "CMFD", table=f"{'CDFDLAST' if doctoral else 'CMFD'}{year}",
                      resource="DISSERTATION", doc_type="博士" if doctoral else "硕士", source=uni.name,
                      source_key=uni.key, supervisor=_name(rng), major=major,
                      page_count=rng.randint(60, 220), **common)
            p.institutions = [uni.name]
            p.author_orgs = [[1]]
            p.date = f"{year}-06-01"
            p.title = p.title if not doctoral else p.title.replace("研究", "问题研究", 1)
            papers.append(p)
        elif kind == "C":
            proc, conf, place, cdate = rng.choice(CONFERENCES)
            p = Paper(filename=f"ZGXX{cdate[:4]}{idx:05d}", dbcode="CPFD", table=f"CPFDLAST{cdate[:4]}",
                      resource="CONFERENCE", doc_type="会议", source=proc, source_key="", conference=conf,
                      conference_place=place, conference_date=cdate, pages=f"{rng.randint(1, 300)}", page_count=rng.randint(4, 12),
                      **common)
            p.year, p.date = int(cdate[:4]), cdate
            papers.append(p)
        elif kind == "N":
            n = rng.choice(NEWSPAPERS)
            p = Paper(filename=f"{n.key}{year}{month:02d}{day:02d}{rng.randint(10, 99):02d}{idx % 10}", dbcode="CCND",
                      table=f"CCNDLAST{year}", resource="NEWSPAPER", doc_type="报纸", source=n.name, source_key=n.key,
                      subtitle=f"{kws[0]}工作迈出新步伐", edition_name=rng.choice(("要闻", "理论", "城市新闻", "科教")),
                      edition_no=f"{rng.randint(1, 16):03d}", **common)
            p.title = f"{rng.choice(('我市', '本省', '多地'))}推进{topic}{rng.choice(('工作', '建设', '改革'))}（{idx}）"
            p.abstract = f"本报讯 {p.title.split('（')[0]}，{kws[0]}与{kws[1]}取得阶段性进展。记者近日从有关部门获悉……"
            p.funds, p.doi, p.references, p.cited = [], "", [], 0
            papers.append(p)
        else:  # book
            p = Paper(filename=f"CBBD{year}{idx:06d}", dbcode="CBBD", table="CBBDTOTAL", resource="BOOK", doc_type="图书",
                      source=rng.choice(PUBLISHERS), source_key="", isbn=f"978-7-{rng.randint(100, 999)}-{rng.randint(10000, 99999)}-{idx % 10}",
                      page_count=rng.randint(180, 520), **common)
            p.title = f"{topic}{rng.choice(('导论', '原理与实务', '前沿问题十讲'))}"
            p.publisher = p.source
            papers.append(p)
        p.sections = _sections(rng, topic, kws, p.title)
    _add_special_cases(papers, rng)
    return Corpus(papers, journals)


def _add_special_cases(papers: list[Paper], rng: random.Random) -> None:
    """Records that exercise quoting, locate ambiguity and identity edge cases."""
    # Same title published twice (journal version and a master thesis): a title lookup finds two rows.
    src = next(p for p in papers if p.resource == "JOURNAL" and not p.online_first)
    twin = next(p for p in papers if p.resource == "DISSERTATION" and p.doc_type == "硕士")
    twin.title, twin.keywords = src.title, list(src.keywords)
    twin.abstract = src.abstract.replace("本文", "本论文", 1)
    # Titles with characters that must be quoted in QueryJson values.
    quoted = [p for p in papers if p.resource == "JOURNAL" and not p.online_first and p.language == "zh"][5:8]
    quoted[0].title = "“AI+教育”背景下教师数字素养的提升路径"
    quoted[1].title = "基于Transformer-XL的长文本检索模型研究"
    quoted[2].title = "数据要素（市场）化配置的法律规制：以个人信息为例"
    # Chinese papers with an English title (the detail page's h2; 篇名 and 主题 also search it): a reference
    # list may cite them by it.
    translated = [p for p in papers if p.resource == "JOURNAL" and not p.online_first and p.language == "zh"][12:14]
    for paper, english in zip(translated, TRANSLATED_TITLES):
        paper.title_en = english


def _own(p: Paper, i: int) -> str:
    """The institution the byline gives the i-th author ("" for a paper without institutions)."""
    return p.institutions[p.author_orgs[i][0] - 1] if p.institutions and p.author_orgs[i] else ""


def _people(papers: list[Paper]) -> dict[str, Person]:
    """Every author's person: the papers of one name, oldest first, split by the institutions they were
    written at, two institutions a person (someone who moved once; namesakes are the next pairs). A paper
    without institutions goes to the name's first person. Sets each paper's ``author_codes``."""
    by_name: dict[str, list[tuple[Paper, int]]] = {}
    for p in sorted(papers, key=lambda p: (p.date, p.filename)):
        p.author_codes = [""] * len(p.authors)
        for i, name in enumerate(p.authors):
            by_name.setdefault(name, []).append((p, i))
    people: dict[str, Person] = {}
    for name, written in by_name.items():
        places = list(dict.fromkeys(_own(p, i) for p, i in written if _own(p, i)))
        for p, i in written:
            own = _own(p, i)
            k = places.index(own) // 2 if own else 0
            code = f"{int(hashlib.sha1(f'{name}|{k}'.encode()).hexdigest()[:12], 16) % 10**12:012d}"
            person = people.setdefault(code, Person(code, name, places[2 * k:2 * k + 2], []))
            person.papers.append(p)
            p.author_codes[i] = code
    return people
