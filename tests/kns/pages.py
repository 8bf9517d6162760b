"""HTML of the simulated CNKI pages, in the structures real pages use.

Class names, ids and attributes follow shared/spec/real-pages.md and shared/cnki-samples/
(kns8s result grid, kcms2 detail, knavi journal, nzkhtml reader, bar.cnki.net order flow,
ecp_header login area, /verify/home).  Variants that sources disagree on are chosen through
the Scenario (see server.py).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from . import changes
from .corpus import Journal, Paper
from .downloads import caj_bytes, content_disposition, download_buttons, esc, foreign, pdf_bytes  # noqa: F401 (pages.* as before)

if TYPE_CHECKING:
    from .server import Scenario

KNS = "https://kns.cnki.net"
NAVI = "https://navi.cnki.net"
BAR = "https://bar.cnki.net"
LOGIN = "https://login.cnki.net"

PRODUCT_STR = ("YSTT4HG0,LSTPFY1C,RMJLXHZ3,JQIRZIYA,JUP3MUPD,1UR4K4HZ,BPBAFJ5S,R79MZMCB,MPMFIG1A,WQ0UVIAA,NB3BWEHK,"
               "XVLO76FD,HR1YT1Z9,BLZOG7CK,PWFIRAGL,EMRPGLPA,J708GVCE,ML4DRIDX,NLBO1Z6R,NN3FJMUV,")
KUAKU = "YSTT4HG0,LSTPFY1C,JUP3MUPD,MPMFIG1A,WQ0UVIAA,BLZOG7CK,PWFIRAGL,EMRPGLPA,NLBO1Z6R,NN3FJMUV"


# ---------------------------------------------------------------- opaque tokens

def encode_token(*parts: object) -> str:
    """Opaque-looking, decodable token (CNKI's v=/p=/id= values are server-encrypted)."""
    text = "|".join(str(p) for p in parts)
    mac = hashlib.sha1(text.encode()).hexdigest()[:10]
    return base64.urlsafe_b64encode(f"{text}|{mac}".encode()).decode().rstrip("=")


def decode_token(token: str) -> list[str] | None:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        return None
    *parts, mac = raw.split("|")
    if not parts or hashlib.sha1("|".join(parts).encode()).hexdigest()[:10] != mac:
        return None
    return parts


def detail_url(p: Paper, epoch: int) -> str:
    return f"{KNS}/kcms2/article/abstract?v={encode_token('v', epoch, p.filename)}&uniplatform=NZKPT&language=CHS"


def source_url(key: str) -> str:
    return f"{NAVI}/knavi/detail?p={encode_token('p', key)}&uniplatform=NZKPT"


def order_url(p: Paper, kind: str, epoch: int) -> str:
    return f"{BAR}/bar/download/order?id={encode_token('o', epoch, kind, p.filename)}"


def author_url(name: str) -> str:
    return f"{KNS}/kcms2/author/detail?v={encode_token('a', name)}"


def person_url(code: str, style: str) -> str:
    """Where a detail page's byline links the person ``code``: the author page of the scenario's generation
    (tests/kns/authors.py)."""
    if style == "legacy":
        return f"{KNS}/kcms/detail/knetsearch.aspx?sfield=au&skey=&code={code}"
    return f"{KNS}/kcms2/author/detail?v={encode_token('a', code)}&uniplatform=NZKPT&language=CHS"


def byline_href(p: Paper, i: int, sc: Scenario) -> str:
    """The i-th author's link on ``p``'s detail page: their author page, or none (``plain_bylines``)."""
    if sc.plain_bylines:
        return "javascript:void(0)"
    return person_url(p.author_codes[i], sc.author_page) if p.author_codes and p.author_codes[i] else author_url(p.authors[i])


# ---------------------------------------------------------------- shared bits

def header_html(sc: Scenario) -> str:
    """ecp_header login area: none / institution / personal / both (real-pages §8, site.md §8.2)."""
    inst = sc.login in ("institution", "both")
    pers = sc.login in ("personal", "both")
    if sc.page_change == "login_header":
        return changes.changed_header(" ".join(esc(n) for n, shown in ((sc.institution_name, inst), (sc.personal_name, pers)) if shown))
    status_cls = "ecp_header_login_status ecp_header_login_status1" if inst else "ecp_header_login_status ecp_header_login"
    parts = [f'<div class="ecp_header_right"><div class="ecp_header_login_area"><div class="{status_cls}">']
    if inst:
        n = esc(sc.institution_name)
        parts.append(f'<div class="ecp_header_unitName" title="{n}" style="display: inline-block;">{n}</div>'
                     f'<ul class="ecp_unit_LoginoutBox" style="display: none"><li class="ecp_unitAccountName">{n}</li>'
                     f'<li><a href="{LOGIN}/logout?type=unit">退出机构账号</a></li></ul>')
    else:
        parts.append(f'<a class="ecp_header_unitLogin" href="{LOGIN}/login/?type=unit">机构登录</a>')
    if pers:
        n = esc(sc.personal_name)
        parts.append(f'<div class="ecp_header_personalName_loginbg" title="{n}"><span class="ecp_header_personalName">{n}</span></div>'
                     f'<a class="ecp_header_logout" href="{LOGIN}/logout">退出登录</a>')
    else:
        parts.append(f'<a class="ecp_header_personal_loginbg" href="{LOGIN}/login/">个人登录</a>'
                     f'<a class="ecp_header_register" href="{LOGIN}/register">注册</a>')
    parts.append('</div><a class="ecp_header_recharge" href="javascript:void(0)">充值</a>'
                 '<a class="ecp_header_member" href="javascript:void(0)">会员</a></div></div>'
                 '<div class="ecp_login_box" style="display: none"><p>请登录</p>'
                 '<input type="text" placeholder="请输入用户名" class="ecp_userName"></div>')
    return "".join(parts)


def parked_slider(active: bool = False, solves: int = 0) -> str:
    """The Tencent slider SDK keeps its widget in the DOM, parked off-screen; active = moved on-screen."""
    if not active:
        return ('<div id="tcaptcha_transform_dy" class="tcaptcha-transform" style="position:absolute;left:15px;'
                'top:-1000000px;width:150px;height:18px;display:block;visibility:visible">拖动下方拼图完成验证</div>')
    return ('<div id="tcaptcha_transform_dy" class="tcaptcha-transform" style="position:fixed;left:30%;top:120px;'
            'width:360px;height:300px;display:block;visibility:visible;background:#fff;border:1px solid #999;z-index:999">'
            '<div id="tCaptchaDyMainWrap"><p>请完成安全验证</p><p>拖动下方拼图完成验证</p>'
            '<button type="button" class="sim-solve" onclick="simSolve()">完成验证（模拟）</button></div></div>'
            + solve_script(solves))


def solve_script(solves: int, kind: str = "captcha") -> str:
    """Solve button handler plus a poller: when the test hook (sim.solve()) clears the challenge,
    the page moves on by itself, as it would after a person solved it."""
    return """<script>
function simDone(){
  var u = new URLSearchParams(location.search).get('returnUrl');
  if (!u) { location.reload(); return; }
  // a detail page reached after a verification carries &captchaId=<uuid> (translators_CN test URLs)
  if (u.indexOf('/kcms2/') >= 0) u += (u.indexOf('?') >= 0 ? '&' : '?') + 'captchaId=' + crypto.randomUUID();
  location.href = u;
}
function simSolve(){
  fetch('/verify/solve', {method:'POST', credentials:'include'}).then(simDone);
}
(function poll(){
  fetch('/verify/status?kind=%KIND%', {credentials:'include'}).then(function(r){ return r.json(); }).then(function(j){
    if (!j.pending && j.solves > %SOLVES%) { simDone(); } else { setTimeout(poll, 500); }
  }, function(){ setTimeout(poll, 1000); });
})();
</script>""".replace("%KIND%", kind).replace("%SOLVES%", str(solves))


def page(title: str, body: str, head: str = "") -> str:
    return (f'<!DOCTYPE html>\n<html lang="zh-CN"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{esc(title)}</title>{head}</head>'
            f'<body>{body}</body></html>')


def fmt_count(n: int, style: str) -> str:
    if style == "wan" and n >= 10000:
        return f"{n / 10000:.1f}万"
    if style == "comma":
        return f"{n:,}"
    return str(n)


def highlight(text: str, terms: list[str]) -> str:
    out = esc(text)
    for t in sorted({t for t in terms if t}, key=len, reverse=True):
        et = esc(t)
        if et and et in out and "<font" not in et:
            out = out.replace(et, f'<font color="red">{et}</font>')
    return out


def shown_name(p: Paper, name: str, sc: Scenario) -> str:
    """An author as the page writes it: English papers may write the surname first in capitals (WANG Wei)."""
    if sc.english_names == "capitalised" and p.language == "en" and " " in name:
        surname, given = name.split(" ", 1)
        return f"{surname.upper()} {given}"
    return name


# ---------------------------------------------------------------- search page

ADV_FIELDS = (("SU", "主题", "TOPRANK"), ("TKA", "篇关摘", "FUZZY"), ("KY", "关键词", "DEFAULT"), ("TI", "篇名", "FUZZY"),
              ("FT", "全文", "FUZZY"), ("AU", "作者", "DEFAULT"), ("FI", "第一作者", "DEFAULT"),
              ("RP", "通讯作者", "DEFAULT"), ("AF", "作者单位", "FUZZY"), ("FU", "基金", "FUZZY"),
              ("AB", "摘要", "FUZZY"), ("CO", "小标题", "FUZZY"), ("RF", "参考文献", "DEFAULT"),
              ("CLC", "分类号", "SUFFIX"), ("LY", "文献来源", "FUZZY"), ("DOI", "DOI", "PREFIX"))


def _adv_row(n: int, field: str, logic: str | None) -> str:
    code, label, op = next(f for f in ADV_FIELDS if f[0] == field)
    items = "".join(f'<li data-val="{c}"><a value="{o}" title="{t}">{t}</a></li>' for c, t, o in ADV_FIELDS)
    logic_html = ""
    if logic:
        logic_html = ('<div class="sort logical"><div class="sort-default"><span value="AND">AND</span><i></i></div>'
                      '<div class="sort-list" style="display:none"><ul><li><a value="AND">AND</a></li>'
                      '<li><a value="OR">OR</a></li><li><a value="NOT">NOT</a></li></ul></div></div>')
    locked = " disableclick" if code == "SU" else ""
    match_val = "=" if op in ("DEFAULT",) else "%"
    return (f'<dd class="{"" if n > 1 else "first"}">{logic_html}<div class="input-box">'
            f'<div class="sort reopt"><div class="sort-default"><span value="{code}" data-opt="{op}">{label}</span><i></i></div>'
            f'<div class="sort-list" style="display:none"><ul>{items}</ul></div></div>'
            f'<input type="text" data-tipid="gradetxt-{n}" maxlength="120" autocomplete="off" placeholder="" value=""'
            f' style="width:420px;height:30px">'
            f'<div class="sort special{locked}"><div class="sort-default"><span value="{match_val}">{"精确" if match_val == "=" else "模糊"}</span><i></i></div>'
            f'<div class="sort-list" style="display:none"><ul><li><a value="=">精确</a></li><li><a value="%">模糊</a></li></ul></div></div>'
            f'</div><a class="add-group" href="javascript:void(0)">+</a><a class="delete-group" href="javascript:void(0)">-</a></dd>')


def adv_search_page(sc: Scenario, title: str = "高级检索-中国知网") -> str:
    rows = _adv_row(1, "SU", None) + _adv_row(2, "AU", "AND") + _adv_row(3, "LY", "AND")
    body = f"""{header_html(sc)}
<div class="search-box"><div class="content">
  <ul class="search-classify-menu"><li name="gradeSearch" class="cur">高级检索</li><li name="majorSearch">专业检索</li>
  <li name="authorSearch">作者发文检索</li><li name="sentenceSearch">句子检索</li></ul>
  <div class="search-main"><div class="gradeSearch">
    <dl class="inputs-list" id="gradetxt">{rows}</dl>
    <div class="extend-box">
      <label><input type="checkbox" id="onlyfulltext">网络首发</label>
      <label><input type="checkbox" name="onlyChecked" data-id="EN" checked>中英文扩展</label>
      <label><input type="checkbox" name="onlyChecked" data-id="TY">同义词扩展</label>
    </div>
    <div class="tit-date-box"><span>时间范围：</span>发表时间
      <input type="text" id="datebox0" placeholder="起始年" autocomplete="off" style="width:100px">
      <input type="text" id="datebox1" placeholder="结束年" autocomplete="off" style="width:100px">
    </div>
    <div class="search-middle">
      <input type="button" class="btn-search" value="检索" style="width:161px;height:34px">
      <input type="button" class="search-btn" value="" style="width:0;height:0;padding:0;border:0">
      <a class="btn-reset" href="javascript:void(0)">重置条件</a>
    </div>
  </div></div>
</div></div>
<div class="result-con-l">
  <div class="search-his-tip"><span class="tip-range">检索范围：</span><b class="range">总库</b><span class="conditions"></span></div>
  <div id="ModuleSearchResult"><div id="briefBox"></div></div>
</div>
{parked_slider(False)}
<script>{ADV_SCRIPT}</script>"""
    return page(title, body)


ADV_SCRIPT = r"""
(function () {
  var PRODUCTS = '%PRODUCTS%', KUAKU = '%KUAKU%';
  window.jQuery = window.jQuery || { active: 0 };
  var st = { query: null, page: 1, pageSize: 20, sortField: '', sortType: '', turnpage: '' };
  function $$(sel, root) { return Array.prototype.slice.call((root || document).querySelectorAll(sel)); }
  function rowInfo(dd, i) {
    var input = dd.querySelector('input[data-tipid]');
    var v = (input.value || '').trim();
    if (!v) return null;
    var f = dd.querySelector('.sort.reopt .sort-default span');
    var field = f.getAttribute('value'), title = f.textContent.trim(), op = f.getAttribute('data-opt');
    var m = dd.querySelector('.sort.special .sort-default span');
    if (field !== 'SU' && m) op = m.getAttribute('value') === '=' ? 'DEFAULT' : 'FUZZY';
    var lg = dd.querySelector('.sort.logical .sort-default span');
    var logic = i === 0 || !lg ? 0 : ({ AND: 0, OR: 1, NOT: 2 })[lg.getAttribute('value')] || 0;
    var key = 'input[data-tipid=' + input.getAttribute('data-tipid') + ']';
    return { Key: key, Title: title, Logic: logic,
             Items: [{ Key: key, Title: title, Logic: logic, Field: field, Operator: op, Value: v, Value2: '' }],
             ChildItems: [] };
  }
  function year(v, end) {
    v = (v || '').trim();
    if (/^\d{4}$/.test(v)) return v + (end ? '-12-31' : '-01-01');
    return v;
  }
  function buildQuery() {
    var child = [];
    $$('#gradetxt > dd').forEach(function (dd) { var r = rowInfo(dd, child.length); if (r) child.push(r); });
    var control = { Key: 'ControlGroup', Title: '', Logic: 0, Items: [], ChildItems: [] };
    var y0 = year(document.getElementById('datebox0').value, false), y1 = year(document.getElementById('datebox1').value, true);
    if (y0 || y1) {
      control.ChildItems.push({ Key: '.tit-date-box', Title: '发表时间', Logic: 0, ChildItems: [],
        Items: [{ Key: '.tit-date-box', Title: '发表时间', Logic: 0, Field: 'PT', Operator: 7, Value: y0, Value2: y1 }] });
    }
    if (document.getElementById('onlyfulltext').checked) {
      control.ChildItems.push({ Key: '#onlyfulltext', Title: '', Logic: 0, ChildItems: [],
        Items: [{ Key: '#onlyfulltext', Title: '网络首发', Logic: 0, Field: 'WLSF', Operator: 'DEFAULT', Value: 'Y', Value2: '' }] });
    }
    var en = document.querySelector('input[name=onlyChecked][data-id=EN]');
    return { Platform: '', Resource: 'CROSSDB', Classid: 'WD0FTY92', Products: '',
             QNode: { QGroup: [{ Key: 'Subject', Title: '', Logic: 0, Items: [], ChildItems: child }, control] },
             ExScope: '1', SearchType: 1, Rlang: en && en.checked ? 'BOTH' : 'CHINESE', KuaKuCode: KUAKU,
             Expands: {}, SearchFrom: 1 };
  }
  function aside(q) {
    var parts = [];
    q.QNode.QGroup[0].ChildItems.forEach(function (c) { parts.push(c.Title + '：' + c.Items[0].Value); });
    return parts.join(' AND ');
  }
  function form(first) {
    var q = JSON.parse(JSON.stringify(st.query));
    q.SearchFrom = first ? 1 : 4;
    var f = { boolSearch: first ? 'true' : 'false', QueryJson: JSON.stringify(q), pageNum: String(st.page),
              pageSize: String(st.pageSize), sortField: st.sortField, sortType: st.sortType, dstyle: 'listmode',
              boolSortSearch: 'false', productStr: PRODUCTS, aside: aside(q), searchFrom: '资源范围：总库',
              subject: '', language: '', uniplatform: '' };
    if (first) { f.CurPage = String(st.page); } else { f.turnpage = st.turnpage; }
    return f;
  }
  function post(f) {
    var body = Object.keys(f).map(function (k) { return encodeURIComponent(k) + '=' + encodeURIComponent(f[k]); }).join('&');
    var x = new XMLHttpRequest();
    window.jQuery.active++;
    x.open('POST', '/kns8s/brief/grid', true);
    x.setRequestHeader('Content-Type', 'application/x-www-form-urlencoded; charset=UTF-8');
    x.setRequestHeader('X-Requested-With', 'XMLHttpRequest');
    x.onloadend = function () {
      window.jQuery.active--;
      var box = document.getElementById('briefBox');
      if (x.responseURL && x.responseURL.indexOf('/verify/') >= 0) {
        location.href = x.responseURL;  // redirected to the full-page challenge
      } else if (x.status === 200) {
        box.innerHTML = x.responseText;
        var t = document.getElementById('hidTurnPage');
        if (t) st.turnpage = t.value;
      } else {
        box.innerHTML = '<p class="no-content" value="">抱歉，暂无数据，请稍后重试。</p>';
      }
    };
    x.send(body);
  }
  function search() {
    st.query = buildQuery();
    if (!st.query.QNode.QGroup[0].ChildItems.length) { return; }
    st.page = 1; st.turnpage = '';
    var tip = document.querySelector('.search-his-tip .conditions');
    if (tip) tip.textContent = aside(st.query);
    post(form(true));
  }
  function turn(page) { if (!st.query) return; st.page = page; post(form(false)); }
  window.cnkiSearch = {
    getSearchJsonInfo: function () { return st.query || buildQuery(); },
    setQueryJson: function (q) { st.query = typeof q === 'string' ? JSON.parse(q) : q; },
    search: search
  };
  document.addEventListener('click', function (e) {
    var t = e.target;
    if (t.closest('.btn-search')) { search(); return; }
    var def = t.closest('.sort-default');
    if (def && !def.parentNode.classList.contains('disableclick')) {
      var list = def.parentNode.querySelector('.sort-list');
      list.style.display = list.style.display === 'none' ? 'block' : 'none';
      return;
    }
    var a = t.closest('.sort-list a');
    if (a && !a.closest('#orderList')) {
      var box = a.closest('.sort'), span = box.querySelector('.sort-default span'), li = a.closest('li');
      span.textContent = a.textContent;
      span.setAttribute('value', li && li.getAttribute('data-val') ? li.getAttribute('data-val') : a.getAttribute('value'));
      if (li && li.getAttribute('data-val')) {
        span.setAttribute('data-opt', a.getAttribute('value'));
        var special = box.parentNode.querySelector('.sort.special');
        if (special) special.classList.toggle('disableclick', li.getAttribute('data-val') === 'SU');
      }
      box.querySelector('.sort-list').style.display = 'none';
      return;
    }
    var add = t.closest('.add-group');
    if (add) {
      var rows = $$('#gradetxt > dd');
      if (rows.length >= 10) return;
      var clone = rows[rows.length - 1].cloneNode(true), inp = clone.querySelector('input[data-tipid]');
      inp.value = ''; inp.setAttribute('data-tipid', 'gradetxt-' + (rows.length + 1));
      document.getElementById('gradetxt').appendChild(clone);
      return;
    }
    var pg = t.closest('#PageNext, #Page_next_top, #PagePrev, #Page_prev_top, .pages a[data-curpage]');
    if (pg) {
      e.preventDefault();
      var n = pg.getAttribute('data-curpage');
      turn(n ? parseInt(n, 10) : st.page + (/Prev|prev/.test(pg.id) ? -1 : 1));
      return;
    }
    var so = t.closest('#orderList li[data-sort]');
    if (so && st.query) {
      st.sortField = so.getAttribute('data-sort'); st.sortType = 'desc'; st.page = 1; st.turnpage = '';
      post(form(true));
    }
  });
  document.addEventListener('submit', function (e) {
    if (e.target.getAttribute('name') !== 'vericodeForm') return;
    e.preventDefault();
    fetch('/verify/solve', { method: 'POST', credentials: 'include' }).then(function () { if (st.query) post(form(true)); });
  });
  // an in-page vericode form (shown by the page or inserted by a client) goes away once the challenge is cleared
  setInterval(function () {
    var f = document.querySelector('#briefBox form[name=vericodeForm]');
    if (!f) return;
    fetch('/verify/status?kind=captcha', { credentials: 'include' }).then(function (r) { return r.json(); }).then(function (j) {
      if (!j.pending && f.isConnected) {
        var box = f.closest('.verifycode-box') || f;
        box.outerHTML = '<div class="verify-ok">验证通过</div>';
      }
    });
  }, 500);
  var qs = new URLSearchParams(location.search), kw = qs.get('kw');
  if (kw) {
    var dd = document.querySelector('#gradetxt > dd');
    var code = qs.get('korder') || 'SU', a = dd.querySelector('.sort.reopt li[data-val="' + code + '"] a');
    if (a) { var sp = dd.querySelector('.sort.reopt .sort-default span'); sp.textContent = a.textContent;
             sp.setAttribute('value', code); sp.setAttribute('data-opt', a.getAttribute('value')); }
    dd.querySelector('input[data-tipid]').value = kw;
    if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', search); else search();
  }
})();
""".replace("%PRODUCTS%", PRODUCT_STR).replace("%KUAKU%", KUAKU)


# ---------------------------------------------------------------- grid fragment

def grid_row(p: Paper, n: int, sc: Scenario, epoch: int, terms: list[str]) -> str:
    href = detail_url(p, epoch)
    marks = '<b class="marktip">网络首发</b>' if p.online_first else ""
    free = '<i class="freeIdent is-hide" title="Free" style="display: none;">免费</i>'
    if p.resource == "NEWSPAPER":
        authors = esc(";".join(p.authors))  # some rows carry plain author text
    else:
        authors = ";".join(f'<a class="KnowledgeNetLink" target="knet" href="{esc(author_url(a))}">'
                           f'{esc(shown_name(p, a, sc))}</a>' for a in p.authors)
    comment = "<!-- 会议 表名是 IPFDTEMP 或者 IPFDPREP 的跳转knavi不加链接 -->"
    if p.source_key:
        source = f'{comment}<p><a target="_blank" href="{esc(source_url(p.source_key))}">{esc(p.source)}</a></p>'
    else:
        source = f"{comment}{esc(p.source)}"
    cited_cls = "cited" if sc.cited_class == "cited" else "quote"
    if p.cited:
        cited = f'<a class="quoteCnt" href="{esc(href)}&amp;anchor=citnet" target="_blank">{fmt_count(p.cited, sc.count_style)}</a>'
    else:
        cited = ""
    if sc.cited_class == "citation":
        # the 引用 column holds a ready GB/T 7714 string; the count moves to td.cited
        citation = f"[1]{'，'.join(p.authors)}.{p.title}[J].{p.source},{p.year}."
        cited = f'{cited}</td><td class="quote"><span class="quote-text">{esc(citation)}</span>'
        cited_cls = "cited"
    oid = order_url(p, "caj", epoch) + "&language=CHS"
    notlogged = " icon-notlogged" if sc.login == "none" else ""
    return (
        f'<tr><td class="seq"><input class="cbItem" type="checkbox" data-cur="{n}" name="CookieName" '
        f'value="{esc(encode_token("e", p.filename))}!">{n}</td>'
        f'<td class="name"><a class="fz14 inline" target="_blank" href="{esc(href)}">{highlight(p.title, terms)}</a>'
        f'{free}{marks}</td>'
        f'<td class="author">{authors}</td>'
        f'<td class="source">{source}</td>'
        f'<td class="date">{esc(p.date)}</td>'
        f'<td class="data"><span>{esc(p.doc_type)}</span></td>'
        f'<td class="{cited_cls}">{cited}</td>'
        f'<td class="download"><div><a class="downloadCnt" href="javascript:void(0);">{fmt_count(p.downloads, sc.count_style)}</a></div></td>'
        f'<td class="operat"><a href="{esc(oid)}" target="_blank" class="downloadlink icon-download{notlogged}" title="下载">'
        f'<i></i><b>下载</b></a>'
        f'<a class="icon-collect" title="收藏" data-dbname="{p.dbcode}" data-resource="{p.resource}" '
        f'data-filename="{esc(p.filename)}"><i></i></a><a class="icon-quote" title="引用"><i></i></a></td></tr>'
    )


# What the site makes of a query's library (echoed as QueryJson.Products in #briefRequest).
PRODUCTS = {
    "WD0FTY92": "CJFQ,CAPJ,ZHYX,CJTL,CDFD,CMFD,CPFD,IPFD,CPVD,CCND,WBFD,SCSF,SCHF,SCSD,SNAD,CCJD,CJFN,CCVD",
    "YSTT4HG0": "CJFQ,CAPJ,CJTL",
}


def products_of(query: Any) -> str:
    raw = {str(k).lower(): v for k, v in query.raw.items()}
    return PRODUCTS.get(str(raw.get("classid") or "WD0FTY92").upper(), "")


SORTS = (("FFD", "相关度"), ("PT", "发表时间"), ("CF", "被引"), ("DFR", "下载"), ("ZH", "综合"))


def grid_fragment(rows: list[Paper], total: int, page_num: int, page_size: int, sort_field: str, sc: Scenario,
                  epoch: int, turnpage: str, terms: list[str], request: dict[str, Any]) -> str:
    pages = min(max(1, math.ceil(total / page_size)), sc.page_cap)
    start = (page_num - 1) * page_size
    body = "".join(grid_row(p, start + i + 1, sc, epoch, terms) for i, p in enumerate(rows))
    active = sort_field.upper() or "FFD"
    cur = ' class="DESC cur"'
    order = "".join(f'<li id="{c}" data-sort="{c}"{cur if c == active else ""}>{t}</li>' for c, t in SORTS)
    pager = []
    if page_num > 1:
        pager.append(f'<a id="PagePrev" class="pagesnums" data-curpage="{page_num - 1}" href="javascript:void(0)">上一页</a>')
    for n in range(max(1, page_num - 2), min(pages, page_num + 4) + 1):
        cls = "pagesnums cur" if n == page_num else "pagesnums"
        pager.append(f'<a class="{cls}" data-curpage="{n}" href="javascript:void(0)">{n}</a>')
    if page_num < pages:
        pager.append(f'<a id="PageNext" class="pagesnums" data-curpage="{page_num + 1}" href="javascript:void(0)">下一页</a>')
    top_next = (f'<a id="Page_next_top" class="icon-next" data-curpage="{page_num + 1}" href="javascript:void(0)"></a>'
                if page_num < pages else "")
    total_txt = f"{total:,}"
    return f"""<div>
<div class="toolbar">
  <div id="countPageDiv" class="result-con-r"><span class="pagerTitleCell"><span>共找到</span><em>{total_txt}</em><span>条结果</span></span>
    <span class="countPageMark" data-pagenum="{pages}">{page_num}/{pages}</span>{top_next}</div>
  <div class="order-group" id="sortList"><span>排序：</span><ul class=" DESC  order" id="orderList">{order}</ul></div>
  <div id="perPageDiv" class="page-show-count"><span>显示</span><div class="sort-default"><span>{page_size}</span></div>
    <div class="sort-list" style="display:none"><ul><li data-val="10"><a>10</a></li><li data-val="20"><a>20</a></li><li data-val="50"><a>50</a></li></ul></div></div>
</div>
<div id="gridTable" class="search-result"><div><div><table class="result-table-list">
<thead><tr><th></th><th>题名</th><th>作者</th><th>来源</th><th>发表时间</th><th>数据库</th><th>被引</th><th>下载</th><th>操作</th></tr></thead>
<tbody>{body}</tbody></table></div></div></div>
<div class="pages" id="pageDiv">{"".join(pager)}</div>
<input id="hidTurnPage" type="hidden" value="{esc(turnpage)}">
<input id="briefRequest" type="hidden" value="{esc(json.dumps(request, ensure_ascii=False))}">
<input id="curPageHid" type="hidden" value="{page_num}">
<input id="totalCnt" type="hidden" value="{total}">
</div>"""


def grid_empty(style: str) -> str:
    """An empty grid answer: a real zero (the scenario's ``empty_style``) or throttling (the ``empty`` fault)."""
    if style == "no_content":
        return '<p class="no-content" value="">抱歉，暂无数据，请稍后重试。</p>'
    if style == "not_found":
        return '<div class="no-content-box"><p class="no-content" value="">未检索到相关文献</p></div>'
    return ('<div><div class="toolbar"><div id="countPageDiv" class="result-con-r"><span class="pagerTitleCell">'
            '<span>共找到</span><em>0</em><span>条结果</span></span></div></div>'
            '<p class="no-content" value="">抱歉，暂无数据，请稍后重试。</p></div>')


def grid_rejected(reason: str, where: str = "value") -> str:
    """A refused query: the reason in ``p.no-content[value]``, or in a plain hidden input beside an empty one."""
    if where == "input":
        return (f'<input type="hidden" id="errorMsg" value="{esc(reason)}">'
                '<p class="no-content" value="">抱歉，暂无数据，请稍后重试。</p>')
    return f'<p class="no-content" value="{esc(reason)}">抱歉，暂无数据，请稍后重试。</p>'


def vericode_form() -> str:
    return ('<div class="verifycode-box"><form name="vericodeForm" id="vericodeForm" action="/verify/solve" method="post">'
            '<div class="verifycode"><p>请输入验证码：</p><input type="text" id="vericode" name="vericode" style="width:120px">'
            '<img id="changeVercode" src="data:image/gif;base64,R0lGODlhAQABAAAAACw=" alt="看不清，换一张" '
            'style="width:90px;height:30px;border:1px solid #ccc">'
            '<input type="submit" class="btn-submit" value="提交"></div></form></div>')


# ---------------------------------------------------------------- detail page

def _top_tip(p: Paper, sc: Scenario) -> str:
    if p.resource == "NEWSPAPER":
        j_level = "地方级" if p.source_key in ("BJRB", "HDJY") else "中央级"
        return (f'<div id="func609" class="source-info"><div class="top-tip"><a target="_blank" title="{esc(p.source)}" '
                f'href="{esc(source_url(p.source_key))}">{esc(p.source)}</a><span title="{j_level}">{j_level}</span></div></div>')
    if p.resource == "DISSERTATION":
        inner = (f'<span><a target="_blank" href="{esc(source_url(p.source_key))}">{esc(p.source)}</a></span>'
                 f'<span class="degree">{"博士" if p.doc_type == "博士" else "硕士"}</span>')
    elif p.resource == "CONFERENCE":
        inner = f'<span><a target="_blank" href="javascript:void(0)">{esc(p.source)}</a></span>'
    elif p.resource == "BOOK":
        inner = f'<span>{esc(p.publisher)}</span>'
    else:
        cite = ""
        if not p.online_first:
            vol = f" ,{p.volume} " if p.volume else " "
            cite = f"{p.year}{vol}({int(p.issue):02d}) : {p.pages}"
        src = esc(source_url(p.source_key))
        if p.filename in sc.no_journal_link:  # a journal CNKI has no journal page for: its name is plain text
            return f'<div class="top-tip"><span>{esc(p.source)} . {esc(cite)}</span></div>'
        inner = (f'<span><a target="_blank" href="{src}">{esc(p.source)} . </a>{esc(cite)}'
                 f'<a target="_blank" title="查看该刊数据库收录来源" href="{src}&amp;index=1">查看该刊数据库收录来源</a>'
                 f'<a class="ydsm" target="_blank" title="使用帮助" href="https://piccache.cnki.net/kdn/index/newhelper/manual.html"><i></i></a></span>')
    tip = f'<div class="top-tip">{inner}</div>'
    if sc.dynamic_doc_top and p.resource in ("DISSERTATION", "CONFERENCE"):
        # theses and conference papers get .doc-top filled by a script (translators_CN watches it)
        return (f'<div class="top-tip"></div><script>setTimeout(function(){{'
                f'document.querySelector(".top-first .top-tip").outerHTML = {json.dumps(tip)};}}, 150);</script>')
    return tip


def _rows(items: list[tuple[str, str, str]]) -> str:
    out = []
    for label, value, cls in items:
        attr = f' class="{cls}"' if cls else ""
        out.append(f'<li class="top-space"><span class="rowtit">{esc(label)}</span><p{attr}>{value}</p></li>')
    return "".join(out)


def detail_page(p: Paper, sc: Scenario, epoch: int) -> str:
    if p.resource == "BOOK":
        return book_page(p, sc)
    title_icons = ' <i class="icon icon-shoufa"></i>' if p.online_first else ""
    authors = "".join(
        f'<span><a target="_blank" href="{esc(byline_href(p, i, sc))}">{esc(shown_name(p, a, sc))}'
        f'{"<sup>" + ",".join(map(str, p.author_orgs[i])) + "</sup>" if len(p.institutions) > 1 else ""}</a>'
        f'{"<i class=" + chr(34) + "icon-email" + chr(34) + "></i>" if a == p.corresponding else ""}'
        f'<input class="authorcode" type="hidden" value="{int(hashlib.md5(a.encode()).hexdigest()[:8], 16)}"></span>'
        for i, a in enumerate(p.authors))
    numbered = len(p.institutions) > 1
    orgs = "".join(f'<span><a href="{KNS}/kcms2/organ/detail?v={encode_token("g", o)}">{f"{i + 1}." if numbered else ""}{esc(o)}</a></span>'
                   for i, o in enumerate(p.institutions))
    org_html = (f'<h3 class="orgn">{orgs}</h3>' if sc.institution_markup == "orgn" else f'<h3 class="author">{orgs}</h3>')
    if p.resource == "NEWSPAPER":
        org_html = ""
    abstract = p.abstract
    visible = abstract if not sc.abstract_truncate or len(abstract) <= sc.abstract_truncate \
        else abstract[:sc.abstract_truncate] + "…"
    tag = sc.abstract_tag
    rows: list[str] = []
    if p.resource == "NEWSPAPER":
        rows.append(f'<div class="row"><span class="rowtit">副标题：</span><p class="abstract">{esc(p.subtitle)}</p></div>')
        rows.append(f'<div class="row"><div class="abstract"><span class="rowtit">正文快照：</span>'
                    f'<div class="abstract-text">{esc(abstract)}</div></div></div>')
        rows.append('<div class="row" style="display: none"><span class="rowtit">关键词：</span><p class="keywords">'
                    + "".join(f"<a>{esc(k)};</a>" for k in p.keywords) + "</p></div>")
    else:
        rows.append(f'<div class="row"><span class="rowtit">摘要：</span><{tag} class="abstract-text" id="ChDivSummary">'
                    f'{esc(visible)}</{tag}><input id="abstract_text" type="hidden" value="{esc(abstract)}"></div>')
        rows.append('<div class="row"><span class="rowtit">关键词：</span><p class="keywords">'
                    + "".join(f'<a href="{KNS}/kcms2/keyword/detail?v={encode_token("k", k)}" target="_blank">{esc(k)};</a>'
                              for k in p.keywords) + "</p></div>")
        if p.funds:
            rows.append('<div class="row"><span class="rowtit">基金资助：</span><p class="funds">'
                        + "".join(f'<span><a href="javascript:void(0)">{esc(f)}；</a></span>' for f in p.funds) + "</p></div>")
    lis: list[tuple[str, str, str]] = []
    if p.doi:
        lis.append(("DOI：", esc(p.doi), ""))
    if p.resource == "DISSERTATION":
        lis += [("导师：", esc(p.supervisor), ""), ("学科专业：", f"{esc(p.major)}", ""),
                ("学位授予年度：", str(p.year), "")]
    if p.resource == "CONFERENCE":
        lis += [("会议名称：", esc(p.conference), ""), ("会议时间：", esc(p.conference_date), ""),
                ("会议地点：", esc(p.conference_place), "")]
    if p.resource == "NEWSPAPER":
        rows += [f'<div class="row"><span class="rowtit">报纸日期：</span><p>{esc(p.date)}</p></div>',
                 f'<div class="row"><span class="rowtit">版名：</span><p>{esc(p.edition_name)}</p></div>',
                 f'<div class="row"><span class="rowtit">版号：</span><p>{esc(p.edition_no)}</p></div>']
    lis.append(("专辑：", "社会科学Ⅱ辑" if p.clc and p.clc[0][0] in "DG" else "信息科技", ""))
    lis.append(("分类号：", esc(";".join(p.clc)), "clc-code"))
    if p.online_first:
        lis.append(("在线公开时间：", f"{esc(p.online_first_time[:10])}（知网平台在线公开时间，不代表文献的发表时间）", ""))
    rows.append(f'<div class="row"><ul>{_rows(lis)}</ul></div>')
    head_time = ""
    if p.online_first:
        head_time = (f'<div class="head-time"><span>（录用定稿）网络首发时间：{esc(p.online_first_time)}</span>'
                     f'<a target="_blank" class="btn-sf" href="{KNS}/kcms2/certificate?v={encode_token("c", p.filename)}">网络首发证书下载<i></i></a></div>')
    dl, tip = download_buttons(p, sc, lambda kind: order_url(p, kind, epoch))
    if sc.html_entry_decoy:  # a greyed stand-in the page keeps ahead of the working entry
        dl.insert(0, '<li class="btn-html"><a class="btn-html" style="color:#999;cursor:not-allowed" '
                     'href="javascript:void(0)">HTML阅读</a></li>')
    downloads = f'{tip}<div class="operate" id="DownLoadParts"><ul class="operate-btn download-btns">{"".join(dl)}</ul></div>'
    bottom = ""
    if sc.double_download:
        bottom = (f'<div class="operate operate-bottom"><ul class="operate-btn download-btns"><li class="btn-dlpdf">'
                  f'<a id="pdfDown" name="pdfDown" target="_blank" href="{esc(order_url(p, "pdf", epoch))}">PDF下载</a></li></ul></div>')
    size = f'<div class="total-inform"><span>页码：{esc(p.pages)}</span><span>页数：{p.page_count}</span><span>大小：{p.size_k}K</span></div>' \
        if p.page_count else ""
    hidden = (f'<input type="hidden" id="paramdbcode" value="{"WWJD" if foreign(p, sc) else p.dbcode}"><input type="hidden" id="paramdbname" value="{p.table}">'
              f'<input type="hidden" id="paramfilename" value="{esc(p.filename)}">'
              f'<input type="hidden" id="export-id" value="{esc(encode_token("e", p.filename))}!">'
              f'<input type="hidden" id="export-url" value="{KNS}/dm8/API/GetExport"><input type="hidden" id="apiHost" value="{KNS}/restapi">')
    title_en = f'<h2>{esc(p.title_en)}</h2>' if p.title_en else ""
    body = f"""{header_html(sc)}
<ul class="nav-menu"><li>学术期刊</li><li>学位论文</li><li>会议</li><li>报纸</li><li>年鉴</li></ul>
<div class="container"><div class="doc">
  <div class="doc-top"><div class="top-first">{_top_tip(p, sc)}<div class="other-versions"></div></div></div>
  <div class="top-second">{head_time}<ul class="other-btns"><li class="btn-note"><a href="https://x.cnki.net/web/page/auth-check?dbcode={p.dbcode}&amp;tablename={p.table}&amp;filename={esc(p.filename)}" target="_blank">记笔记</a></li></ul></div>
  <div class="brief">
    <div class="wx-tit"><h1>{esc(p.title)}{title_icons} <span id="corr-video" class="type" style="display: none">附视频</span></h1>{title_en}
      <h3 class="author" id="authorpart">{authors}</h3>{org_html}</div>
    {"".join(rows)}
  </div>
  {size}
  {downloads}
  <ul class="module-tab tpl_lieteratures"><li data-id="reference">参考文献</li><li data-id="citing">引证文献</li><li data-id="co-citing">共引文献</li></ul>
  {bottom}
  {hidden}
</div></div>
{parked_slider(False)}"""
    head = ""
    if sc.detail_meta:
        metas = [("citation_title", p.title)] + [("citation_author", a) for a in p.authors]
        metas += [("citation_author_institution", o) for o in p.institutions]
        metas += [("citation_publication_date", p.date[:10]), ("citation_keywords", "; ".join(p.keywords))]
        if p.is_journal:
            metas += [("citation_journal_title", p.source), ("citation_issue", p.issue), ("citation_volume", p.volume)]
        if p.resource == "CONFERENCE":
            metas.append(("citation_conference_title", p.conference))
        if p.doi:
            metas.append(("citation_doi", p.doi))
        head = "".join(f'<meta name="{k}" content="{esc(v)}">' for k, v in metas if v)
    title = f"{p.title} - 中国知网"
    if sc.detail_js is True or (isinstance(sc.detail_js, (set, frozenset, list, tuple)) and p.filename in sc.detail_js):
        # JS-rendered variant: the served HTML holds no article until a script inserts it
        return page(title, f'<div id="root"></div><script>setTimeout(function(){{document.getElementById("root")'
                           f'.innerHTML = {json.dumps(body)};}}, 200);</script>')
    return page(title, body, head)


def book_page(p: Paper, sc: Scenario) -> str:
    body = f"""{header_html(sc)}
<div class="main-book"><div class="book-info">
  <div class="book-cover"><img alt="{esc(p.title)}" src="data:image/gif;base64,R0lGODlhAQABAAAAACw="></div>
  <div class="book-detail"><p class="book-name">{esc(p.title)}</p>
    <p class="book-author">{esc("；".join(p.authors))} 著</p><p>出版社：{esc(p.publisher)}</p>
    <p>ISBN：{esc(p.isbn)}</p><p>出版时间：{p.year}</p><p>页数：{p.page_count}</p></div>
  <div class="book-summary"><span class="rowtit">内容简介：</span><p>{esc(p.abstract)}</p></div>
</div></div>"""
    return page(f"{p.title} - 中国知网", body)


def timeout_verify_page(solves: int) -> str:
    return page("知网节超时验证", '<div class="verify-box"><p>知网节超时验证</p><p>请完成验证后继续访问</p>'
                '<button type="button" class="sim-solve" onclick="simSolve()">完成验证（模拟）</button></div>' + solve_script(solves))


# ---------------------------------------------------------------- knavi

# The other tags 2026 journal pages carry (cookjohn/cnki-skills cnki-journal-index), by journal (``journal_tags_more``).
EXTRA_TAGS = {"KFDX": ("Scopus", "CAS"), "YXYX": ("卓越期刊", "JST"), "SCIS": ("CAS", "JST", "Scopus", "卓越期刊")}


def journal_tags(j: Journal, sc: Scenario) -> list[str]:
    """The tag spans of a journal page: as listed, or the 2026 spelling (北大核心期刊, a bare AMI, WJCI); with
    ``journal_tags_more`` also CAS, JST, Scopus and 卓越期刊 where EXTRA_TAGS has them."""
    extra = list(EXTRA_TAGS.get(j.key, ())) if sc.journal_tags_more else []
    if sc.journal_tags != "2026":
        return list(j.tiers) + extra
    tags = ["北大核心期刊" if t == "北大核心" else "AMI" if t.startswith("AMI") else t for t in j.tiers]
    if any(t in ("CSCD", "EI", "SCI") for t in j.tiers):
        tags.append("WJCI")
    return tags + extra


def journal_base_info(j: Journal, sc: Scenario) -> str:
    """The 基本信息 block: labelled lines (``plain``), the 2024+ ``ul#JournalBaseInfo`` list with
    ``li > p.hostUnit > label + span[title]`` (``host_unit``), or either without the ISSN/CN lines (``missing``)."""
    rows = [("主办单位", j.sponsor), ("出版周期", j.period)]
    if sc.journal_issn != "missing":
        rows += [("ISSN", j.issn), ("CN", j.cn)]
    if j.former:
        rows.append(("曾用刊名", ";".join(j.former)))
    if sc.journal_issn == "host_unit":
        items = "".join(f'<li><p class="hostUnit"><label>{label}：</label><span title="{esc(value)}">{esc(value)}</span></p></li>'
                        for label, value in rows)
        return f'<ul id="JournalBaseInfo">{items}</ul>'
    return "".join(f"<p>{label}：<span>{esc(value)}</span></p>" for label, value in rows)


def journal_page(j: Journal, sc: Scenario, papers: list[Paper]) -> str:
    if j.kind != "journal":
        return unit_page(j, sc, papers)
    name_en = f"<p>{esc(j.name_en)}</p>" if j.name_en else ""
    tiers = "".join(f'<span class="journalType journalType2" title="{esc(t)}">{esc(t)}</span>' for t in journal_tags(j, sc))
    incl = "".join(f"<li>{esc(t)}{'期刊（2023年版）' if t == '北大核心' else ''}</li>" for t in j.tiers)
    base_info = journal_base_info(j, sc)
    metrics = ""
    if j.composite is not None:
        metrics += f'<p><label>({j.metric_year}版)复合影响因子：</label><span>{j.composite}</span></p>'
    if j.aggregate is not None:
        metrics += f'<p><label>({j.metric_year}版)综合影响因子：</label><span>{j.aggregate}</span></p>'
    if j.duplicate_metrics and j.composite is not None:
        # an older-edition line under the same label: the value is ambiguous on purpose
        metrics += f'<p><label>({(j.metric_year or 2025) - 1}版)复合影响因子：</label><span>{j.composite - 0.4:.3f}</span></p>'
    pages = sorted({p.year for p in papers}, reverse=True)
    years = "".join(f'<dl id="{y}_Year_Issue" class="s-dataList clearfix"><dt><em>{y}</em></dt><dd>'
                    + "".join(f'<a id="yq{y}{m:02d}" value="{encode_token("yq", j.key, y, m)}">No.{m:02d}</a>' for m in (1, 2, 3))
                    + "</dd></dl>" for y in pages[:20])
    body = f"""{header_html(sc)}
<div class="container"><div class="header-journal">
<dl class="journalInfo"><dt><img class="pic-book" alt="{esc(j.name)}" src="https://c61.cnki.net/cjfd/small/{j.key}.jpg"></dt>
<dd class="infobox">
  <h3 class="titbox titbox1">{esc(j.name)}{name_en}</h3>
  <p class="journalType">{tiers}</p>
  <div class="listbox"><h4>该刊被以下数据库收录</h4><ul>{incl}</ul></div>
  <div class="listbox"><h4>基本信息</h4>
    {base_info}
  </div>
  <div class="listbox"><h4>出版信息</h4><p>专辑名称：<span>社会科学Ⅱ辑</span></p><p>出版文献量：<span>{len(papers) * 37}篇</span></p></div>
  <div class="listbox"><h4>评价信息</h4>{metrics}</div>
  <a class="more" href="javascript:void(0)">更多介绍</a>
</dd></dl></div>
<aside class="sidebar"><p>相关推荐：SCI 复合影响因子：99.99</p></aside>
<ul class="tab-list"><li class="on cur">刊期浏览</li><li>栏目浏览</li><li>统计与评价</li></ul>
<div id="yearissue0" class="yearissuepage" pageindex="0">{years}</div>
<input type="hidden" id="pykm" value="{j.key}"><input type="hidden" id="shareChName" value="{esc(j.name)}">
<input type="hidden" id="time" value="{encode_token('t', j.key)}">
</div>"""
    return page(f"{j.name} - 中国知网", body)


def unit_page(j: Journal, sc: Scenario, papers: list[Paper]) -> str:
    kind = {"university": "学位授予单位", "newspaper": "报纸"}.get(j.kind, "出版来源")
    body = f"""{header_html(sc)}
<div class="container"><dl class="journalInfo"><dd class="infobox"><h3 class="titbox titbox1">{esc(j.name)}</h3>
<p class="journalType"><span>{kind}</span>{f'<span title="{esc(j.level)}">{esc(j.level)}</span>' if j.level else ''}</p>
<div class="listbox"><p>收录文献量：<span>{len(papers)}篇</span></p></div></dd></dl></div>"""
    return page(f"{j.name} - 中国知网", body)


# ---------------------------------------------------------------- reader

def reader_sections_html(p: Paper, start: int, end: int) -> str:
    out = []
    for i, s in enumerate(p.sections[start:end], start=start):
        tag = "h1" if s.level == 1 else "h2"
        paras = "".join(f"<p>{esc(t)}</p>" for t in s.paragraphs)
        out.append(f'<div class="ChapterWrap Content" data-index="{i}"><{tag} class="Chapter" id="sec{i}" '
                   f'data-id="{esc(p.filename)}-H{i}">{esc(s.title)}</{tag}>{paras}</div>')
    if end >= len(p.sections) and p.references:
        refs = "".join(f"<p>[{n}] {esc(r)}</p>" for n, r in enumerate(p.references, start=1))
        out.append(f'<div class="ChapterWrap Content" data-index="refs"><h3 id="bibliography">参考文献</h3>{refs}</div>'
                   f'<div class="word-end">（全文完）</div>')
    return "".join(out)


def reader_page(p: Paper, sc: Scenario, trial: bool, solved_slider: bool, chapter_url: str, solves: int) -> str:
    catalog = "".join(f'<p class="tit" data-id="{esc(p.filename)}-H{i}" data-level="{s.level}">{esc(s.title)}</p>'
                      for i, s in enumerate(p.sections))
    if p.references:
        catalog += '<p class="tit" data-id="bibliography" data-level="1">参考文献</p>'
    people = "；".join(p.authors) + "<br>" + "；".join(p.institutions)
    head = (f'<div class="ChapterH1"><h1 class="Chapter" data-id="{esc(p.filename)}-H">{esc(p.title)}</h1></div>'
            f'<div class="ChapterMsg"><p class="Chapter-people">{people}</p></div>'
            f'<p><b>摘要：</b>{esc(p.abstract)}</p><p><b>关键词：</b>{esc("；".join(p.keywords))}</p>')
    n = len(p.sections)
    first = 1 if trial else (2 if (sc.reader_lazy or sc.reader_slider) else n)
    content = reader_sections_html(p, 0, first)
    slider = ""
    script = ""
    if sc.reader_slider and not solved_slider:
        slider = ('<div class="read-btn-boxXml"><p>滑动验证，继续阅读全文</p><div class="slider-wrapper" style="width:300px;height:40px;'
                  'background:#eee;position:relative"><div class="handler handler_bg" style="width:40px;height:38px;background:#4a90e2"'
                  ' onclick="simSolve()"></div><span class="drag-text">向右滑动完成验证</span></div></div>' + solve_script(solves, "slider"))
    elif trial:
        if sc.trial_notice:
            slider = '<div class="word-end trial-end">试读结束，购买后阅读全文</div>'
    elif first < n:
        script = f"""<script>
(function(){{
  var next = {first}, total = {n}, url = {json.dumps(chapter_url)};
  window.jQuery = window.jQuery || {{active: 0}};
  function load(){{
    if (next >= total) return;
    window.jQuery.active++;
    fetch(url + '&start=' + next, {{credentials: 'include'}}).then(function(r){{ return r.text(); }}).then(function(html){{
      window.jQuery.active--;
      document.getElementById('paperRead').insertAdjacentHTML('beforeend', html);
      next = total;
    }});
  }}
  setTimeout(load, {int(sc.reader_lazy_delay * 1000)});
}})();
</script>"""
    body = f"""{header_html(sc) if not trial else ''}
<div class="reader-top"><span class="reader-title">{esc(p.title)}</span></div>
<div class="catalogboxs"><div class="catalogbox"><p class="catalog-tit">目录</p>{catalog}</div></div>
<div id="paperRead" class="ChapterContainer">{head}{content}</div>
{slider}{script}"""
    return page(f"{p.title} - HTML阅读 - 中国知网", body)


def reader_frame_page(p: Paper, frame_url: str) -> str:
    """An nzkhtml reader whose text sits in a same-origin iframe (the frame is the usual reader page)."""
    body = (f'<div class="reader-top"><span class="reader-title">{esc(p.title)}</span></div>'
            f'<iframe id="readerFrame" src="{esc(frame_url)}" style="width:100%;height:3000px;border:0"></iframe>')
    return page(f"{p.title} - HTML阅读 - 中国知网", body)


def _kreader_items(p: Paper, trial: bool, invoice: str) -> list[dict[str, Any]]:
    """fullText of the 2026 reader JSON: CATALOG headings (levels kept), PARAGRAPHs with citation marks,
    one FIGURE and one TABLE in the second section. A trial keeps the catalogue but only the first
    section's text."""
    items: list[dict[str, Any]] = []
    for i, s in enumerate(p.sections):
        items.append({"type": "CATALOG", "value": {"no": str(100 + 10 * i), "title": f"<b>{esc(s.title)}</b>",
                                                   "level": str(s.level)}})
        if trial and i >= 1:
            continue
        for j, para in enumerate(s.paragraphs):
            mark = '<sup><a id="68" type="reference">[1]</a></sup>' if j == 0 and p.references else ""
            items.append({"type": "PARAGRAPH", "value": {"no": str(101 + 10 * i + j), "content": esc(para) + mark}})
        if i == 1 and not trial:
            href = (f"{KNS}/ossapi/kreader-api/v1/xml/attachment?product={p.dbcode}&filename={p.filename}"
                    f"&annexid={p.filename}_231.jpg&invoice={invoice}&nonce=n&idenid=i")
            items.append({"type": "FIGURE", "value": {"no": "231", "title": f"<b>图1 {esc((p.keywords or ['研究'])[0])}的分析框架</b>",
                                                      "enTitle": "<b>Fig.1 Analytical framework</b>", "listImageHref": [href]}})
            items.append({"type": "TABLE", "value": {"no": "232", "title": "<b>表1 样本构成</b>",
                                                     "content": "<tr><td>类别</td><td>数量</td></tr><tr><td>期刊论文</td><td>120</td></tr>"}})
    return items


def kreader_data(p: Paper, trial: bool, trial_flag: bool, invoice: str) -> dict[str, Any]:
    """`data` of ossapi/kreader-api/v1/xml/data (datatype=all), shaped as real-pages-2026 §4 records."""
    metadata: dict[str, Any] = {"resourceType": p.dbcode, "fileName": p.filename, "title": f"<b>{esc(p.title)}</b>",
                                "titleEN": esc(p.title_en), "receivedDate": p.date[:10], "abstracts": esc(p.abstract),
                                "abstractsEN": ""}
    if trial and trial_flag:
        metadata["isTrial"] = True
    return {
        "metadata": metadata,
        "authors": [{"title": a} for a in p.authors],
        "affiliation": [{"title": o} for o in p.institutions],
        "keywords": [{"title": k} for k in p.keywords],
        "funds": [{"title": f} for f in p.funds],
        "source": {"type": p.resource, "year": str(p.year), "issue": p.issue},
        "fullText": _kreader_items(p, trial, invoice),
        "references": [] if trial else [{"no": str(67 + n), "seq": str(n), "title": f"[{n}] {esc(r)}"}
                                        for n, r in enumerate(p.references, start=1)],
    }


# The 2026 reader's page: a small app shell. Its script asks ossapi/kreader-api for the JSON with the
# page's own query and renders it: a 欢迎 banner, the 目录图表 panel, the article, 参考文献, 返回顶部, and
# for a trial the 试读结束 notice with its slider box.
_KREADER_SCRIPT = """<script>
(function () {
  var app = document.getElementById('app'), TRIAL = %TRIAL%, WELCOME = %WELCOME%;
  function plain(html) { var el = document.createElement('div'); el.innerHTML = html || ''; return el.textContent; }
  function names(list) { return (list || []).map(function (x) { return x.title; }).join('；'); }
  function render(d) {
    var md = d.metadata || {}, body = [], cat = [];
    (d.fullText || []).forEach(function (it) {
      var v = it.value || {};
      if (it.type === 'CATALOG') {
        var h = 'h' + (Number(v.level || 1) + 1);
        body.push('<' + h + ' class="catalog-title">' + v.title + '</' + h + '>');
        cat.push('<li class="level' + v.level + '">' + plain(v.title) + '</li>');
      } else if (it.type === 'PARAGRAPH') {
        body.push('<p>' + v.content + '</p>');
      } else if (it.type === 'FIGURE') {
        body.push('<div class="figure"><div class="figure-img"></div><p class="figure-title">' + v.title
          + '</p><p class="figure-title-en">' + (v.enTitle || '') + '</p></div>');
        cat.push('<li class="figure">' + plain(v.title) + '</li>');
      } else if (it.type === 'TABLE') {
        body.push('<div class="table-box"><p class="table-title">' + v.title + '</p><table>' + v.content + '</table></div>');
        cat.push('<li class="table">' + plain(v.title) + '</li>');
      }
    });
    var refs = (d.references || []).map(function (r) { return '<li>' + r.title + '</li>'; }).join('');
    var trial = TRIAL ? '<div class="read-btn-boxXml"><p class="trial-end">试读结束，登录或购买后可继续阅读全文</p>'
      + '<div class="slider-wrapper" style="width:300px;height:40px;background:#eee"><span class="drag-text">'
      + '向右滑动，继续阅读全文</span></div></div>' : '';
    app.innerHTML = '<div class="reader-header"><span class="welcome">欢迎' + (WELCOME ? ' ' + WELCOME : '您') + '</span></div>'
      + '<div class="reader-body"><div class="catalog-panel"><div class="panel-tabs"><span>目录</span><span>图表</span></div>'
      + '<ul>' + cat.join('') + '</ul></div><div class="article-main"><h1 class="article-title">' + md.title + '</h1>'
      + '<div class="authors">' + names(d.authors) + '</div><div class="orgs">' + names(d.affiliation) + '</div>'
      + '<div class="abstract"><span class="label">摘要：</span>' + (md.abstracts || '') + '</div>'
      + '<div class="keywords"><span class="label">关键词：</span>' + names(d.keywords) + '</div>'
      + '<div class="article-body">' + body.join('') + '</div>'
      + (refs ? '<div class="references"><h2>参考文献</h2><ol>' + refs + '</ol></div>' : '') + trial + '</div></div>'
      + '<a class="back-top" href="#app">返回顶部</a>';
  }
  function failed() { app.innerHTML = '<div class="reader-error">文献加载失败，请刷新重试</div>'; }
  var query = new URLSearchParams(location.search);
  query.set('datatype', 'all');
  fetch('/ossapi/kreader-api/v1/xml/data?' + query.toString(), {credentials: 'include'})
    .then(function (r) { return r.json(); })
    .then(function (j) { if (j && j.code === 200 && j.data) render(j.data); else failed(); }, failed);
})();
</script>"""


def kreader_page(p: Paper, trial: bool, welcome: str) -> str:
    script = _KREADER_SCRIPT.replace("%TRIAL%", "true" if trial else "false").replace(
        "%WELCOME%", json.dumps(welcome, ensure_ascii=False))
    return page(f"HTML阅读-{p.title}", f'<div id="app"></div>{script}')


# ---------------------------------------------------------------- download, login, misc

REFUSALS = {
    "balance": ("余额不足", "您的账户余额不足，请充值后下载。"),
    "unsubscribed": ("未订购", "您所在的机构未订购该产品，无权下载。机构未购买该资源。"),
    "no_permission": ("无权限", "对不起，您暂无权限下载该文献（权限不足）。"),
    "session_end": ("会话已经结束", "会话已经结束，请返回原页面刷新后重试。"),
    "referer": ("来源应用不正确", "来源应用不正确(01)"),
    "expired": ("下载失败", "下载链接已过期，请返回原页面刷新。服务端出现未知错误。"),
    "no_album": ("未订购", "对不起，贵单位没有订购该专辑，请您与贵单位图书馆联系订购！"),
    # Older generations' wording (legacy crawlers), still what the product must recognise.
    "not_valid": ("提示", "产品不在有效期范围之内！"),
    "too_frequent": ("提示", "对不起，您的操作太过频繁！请退出后重新登录。"),
}


# The refusal CNKI sends instead of a reader or a file when it holds only the bibliographic record.
ABSTRACT_ONLY = "对不起，本刊只收录题录信息，暂不提供原文下载。给您造成不便请谅解！"


def error_msg_url(message: str) -> str:
    """CNKI's error page, its message URL-encoded in the query (the host is not known; kns is assumed)."""
    return f"{KNS}/kns8s/ErrorMsg.html?errorMsg={quote(message, safe='')}&errorCode=-1"


def error_msg_page(message: str, blank: bool = False) -> str:
    """The error page; ``blank``: a shell whose script never shows the message (it is only in the URL)."""
    if blank:
        return page("提示信息 - 中国知网", '<div id="app" class="errorMsg-box"></div>')
    return page("提示信息 - 中国知网", f'<div class="errorMsg-box"><p class="errorMsg">{esc(message or "发生错误")}</p>'
                                   f'<a href="javascript:history.back()">返回</a></div>')


def refusal_page(kind: str) -> str:
    title, text = REFUSALS[kind]
    return page(f"{title} - 中国知网", f'<div class="download-error"><div class="error-tips"><p class="tips">{esc(text)}</p>'
                                     f'<a href="javascript:history.back()">返回</a></div></div>')


def chapter_page(p: Paper) -> str:
    """What a 分章下载/分页下载 entry opens: a list of parts, not the whole document."""
    items = "".join(f'<li><span class="txt">{esc(s.title)}</span><span class="page">{i + 1}</span>'
                    f'<a href="javascript:void(0)">下载</a></li>' for i, s in enumerate(p.sections))
    return page(f"{p.title} - 分章下载 - 中国知网", f'<div class="ls-chapters"><ul>{items}</ul></div>')


def login_page(sc: Scenario, return_url: str, unit: bool) -> str:
    ret = esc(return_url)
    personal_form = f"""<form class="login-form" id="loginForm" method="post" action="/login/doLogin">
  <input type="hidden" name="ReturnURL" value="{ret}">
  <div class="item"><input type="text" id="TextBoxUserName" name="username" placeholder="用户名/手机号/邮箱" style="width:260px"></div>
  <div class="item"><input type="password" id="TextBoxPwd" name="password" placeholder="密码" style="width:260px"></div>
  <div class="item"><input type="submit" class="btn-login" value="登录" style="width:260px;height:36px"></div>
</form>"""
    unit_form = f"""<form class="login-form" id="unitForm" method="post" action="/login/doUnitLogin">
  <input type="hidden" name="ReturnURL" value="{ret}">
  <div class="item"><input type="text" name="unit" value="{esc(sc.institution_name)}" placeholder="机构名称" style="width:260px"></div>
  <div class="item"><input type="password" name="password" placeholder="机构密码" style="width:260px"></div>
  <div class="item"><input type="submit" class="btn-login" value="机构登录" style="width:260px;height:36px"></div>
</form>"""
    body = f"""<div class="login-main"><div class="login-box">
<ul class="login-tab"><li class="{'' if unit else 'cur'}"><a href="/login/?ReturnURL={quote(return_url)}">账号登录</a></li>
<li class="{'cur' if unit else ''}"><a href="/login/?type=unit&amp;ReturnURL={quote(return_url)}">机构登录</a></li></ul>
{unit_form if unit else personal_form}
<p class="other-login">其他登录方式：<a href="javascript:void(0)">CARSI</a> <a href="javascript:void(0)">微信</a></p>
</div></div>"""
    return page("登录 - 中国知网", body)


def verify_home_page(return_url: str, solves: int) -> str:
    """kns.cnki.net/verify/home: an empty SPA shell; its script draws the challenge (and our solve button)."""
    script = """<script>
setTimeout(function(){
  document.getElementById('app').innerHTML = '<div class="captcha-dialog" style="margin:80px auto;width:360px;border:1px solid #999;padding:20px">'
    + '<p>请完成安全验证</p><p>拖动下方拼图完成验证</p><button type="button" class="sim-solve" onclick="simSolve()">完成验证（模拟）</button></div>';
}, 50);
</script>"""
    return page("安全验证", f'<div id="app"></div>{solve_script(solves)}{script}',
                head=f'<meta name="sim-return-url" content="{esc(return_url)}">')


def bar_verify_page(return_url: str, solves: int, words: bool) -> str:
    """bar.cnki.net/bar/verify/index.html: a puzzle, or 请依次点击：X X X; solving goes on to returnUrl."""
    task = "请依次点击：知 识 网" if words else "向右拖动滑块填充拼图"
    body = (f'<div class="verify-wrap" style="margin:80px auto;width:360px;border:1px solid #999;padding:20px">'
            f'<div class="verify-img-panel" style="height:150px;background:#ddd"></div><p class="verify-tips">{task}</p>'
            f'<button type="button" class="sim-solve" onclick="simSolve()">完成验证（模拟）</button></div>')
    return page("拼图校验-中国知网", body + solve_script(solves), head=f'<meta name="sim-return-url" content="{esc(return_url)}">')


def simple_page(title: str, text: str) -> str:
    return page(title, f'<div class="error-main"><p class="error-tips">{esc(text)}</p></div>')


def home_page(sc: Scenario) -> str:
    body = f"""{header_html(sc)}
<div class="search-main"><div class="input-box">
  <div id="DBFieldBox" class="sort"><span>主题</span></div>
  <div id="DBFieldList" style="display:none"><a value="SU$%=|">主题</a><a value="TI">篇名</a><a value="KY">关键词</a></div>
  <input type="text" id="txt_SearchText" class="search-input" maxlength="100" placeholder="中文文献、外文文献" style="width:500px">
  <input type="button" class="search-btn" value="检索" style="width:80px" onclick="location.href='{KNS}/kns8s/defaultresult/index?korder=SU&amp;kw='+encodeURIComponent(document.getElementById('txt_SearchText').value)">
</div>
<a class="high-search" href="{KNS}/kns8s/AdvSearch" target="_blank">高级检索</a>
<a href="{NAVI}/knavi" target="_blank">出版物检索</a></div>"""
    return page("中国知网", body)
