# SPDX-License-Identifier: GPL-2.0
#
# olddefconfig for kbisect's simulated tree: reads the tree's Kconfig
# (from the top file through its source statements, $(SRCARCH) set, help
# texts skipped) and rewrites the .config given as the input the way
# scripts/kconfig/conf --olddefconfig does:
#
#   - a symbol no Kconfig declares is dropped;
#   - a symbol whose dependencies ("depends on", and those of the if
#     blocks, menus and choice around it) are not met is not set;
#   - a symbol without a prompt takes its default, whatever .config says;
#   - "select" forces a symbol on, dependencies or not;
#   - of a choice, the last alternative .config sets to y wins if it may,
#     else the choice's default;
#   - missing values take their defaults.
#
# Expressions: symbols, y, n, m, numbers, "strings", !, &&, ||, =, !=,
# parentheses. Usage:
#   awk -v srctree=DIR -v srcarch=x86 -v kernelversion=6.12.57 -f olddefconfig.awk .config
BEGIN {
	nsyms = 0; nchoices = 0; depth = 0
	readkconfig(srctree "/Kconfig")
}

function indentof(line,   n, i, c) {
	n = 0
	for (i = 1; i <= length(line); i++) {
		c = substr(line, i, 1)
		if (c == " ") n++
		else if (c == "\t") n = n - n % 8 + 8
		else break
	}
	return n
}

function inherited(   i, s) {
	s = ""
	for (i = 1; i <= depth; i++)
		if (blockdep[i] != "") s = s (s == "" ? "" : " && ") "(" blockdep[i] ")"
	return s
}

function declare(sym) {
	if (!(sym in declared)) {
		declared[sym] = 1
		order[++nsyms] = sym
		dep[sym] = ""
		ndefs[sym] = 0
	}
}

function adddep(cur, e) {
	if (cur ~ /^block:/) {
		e = "(" e ")"
		blockdep[substr(cur, 7)] = blockdep[substr(cur, 7)] == "" ? e : blockdep[substr(cur, 7)] " && " e
		if (blocktype[substr(cur, 7)] == "choice") choicedep[blockchoice[substr(cur, 7)]] = blockdep[substr(cur, 7)]
	} else if (cur != "") {
		dep[cur] = dep[cur] == "" ? "(" e ")" : dep[cur] " && (" e ")"
	}
}

# settype reads "bool", "tristate", "int", "hex", "string" and
# "def_bool" lines, with their prompt or default.
function settype(cur, word, rest,   v, c) {
	if (cur == "" || cur ~ /^block:/) return
	if (word ~ /^def_/) {
		type[cur] = substr(word, 5)
		splitcond(rest)
		ndefs[cur]++; defval[cur, ndefs[cur]] = sc_value; defcond[cur, ndefs[cur]] = sc_cond
		return
	}
	type[cur] = word
	if (rest ~ /^"/) prompt[cur] = 1
}

# splitcond splits "VALUE if COND" into sc_value and sc_cond.
function splitcond(s,   i) {
	i = index(s, " if ")
	if (i > 0) { sc_value = substr(s, 1, i - 1); sc_cond = substr(s, i + 4) }
	else { sc_value = s; sc_cond = "" }
	gsub(/^[ \t]+|[ \t]+$/, "", sc_value)
}

function readkconfig(file,   line, word, rest, cur, inhelp, helpind, ind, path, sym, n, ok) {
	cur = ""; inhelp = 0
	while ((ok = (getline line < file)) > 0) {
		if (inhelp) {
			if (line ~ /^[ \t]*$/) continue
			ind = indentof(line)
			if (helpind < 0) helpind = ind
			if (ind >= helpind && ind > baseind) continue
			inhelp = 0
		}
		sub(/^[ \t]+/, "", line)
		sub(/[ \t]*#.*$/, "", line)
		if (line == "") continue
		word = line; rest = ""
		if (match(line, /[ \t]+/)) { word = substr(line, 1, RSTART - 1); rest = substr(line, RSTART + RLENGTH) }
		if (word == "config" || word == "menuconfig") {
			sym = rest
			declare(sym)
			dep[sym] = inherited()
			if (depth > 0 && blocktype[depth] == "choice") {
				n = blockchoice[depth]
				choiceof[sym] = n
				members[n] = members[n] " " sym
			}
			cur = sym
		} else if (word == "choice" || word == "menu" || word == "if") {
			depth++
			blocktype[depth] = word
			blockdep[depth] = word == "if" ? rest : ""
			if (word == "choice") { blockchoice[depth] = ++nchoices; choicedep[nchoices] = ""; choicedefault[nchoices] = "" }
			cur = word == "if" ? "" : "block:" depth
		} else if (word == "endchoice" || word == "endmenu" || word == "endif") {
			if (depth > 0) depth--
			cur = ""
		} else if (word == "depends" && rest ~ /^on[ \t]/) {
			sub(/^on[ \t]+/, "", rest)
			adddep(cur, rest)
		} else if (word == "bool" || word == "tristate" || word == "int" || word == "hex" || word == "string" || word == "def_bool" || word == "def_tristate") {
			settype(cur, word, rest)
		} else if (word == "prompt") {
			if (cur != "" && cur !~ /^block:/) prompt[cur] = 1
		} else if (word == "default") {
			splitcond(rest)
			if (cur ~ /^block:/ && blocktype[substr(cur, 7)] == "choice") choicedefault[blockchoice[substr(cur, 7)]] = sc_value
			else if (cur != "") { ndefs[cur]++; defval[cur, ndefs[cur]] = sc_value; defcond[cur, ndefs[cur]] = sc_cond }
		} else if (word == "select") {
			splitcond(rest)
			if (cur != "" && cur !~ /^block:/) { nsel[cur]++; selsym[cur, nsel[cur]] = sc_value; selcond[cur, nsel[cur]] = sc_cond }
		} else if (word == "help" || word == "---help---") {
			inhelp = 1; helpind = -1; baseind = 0
		} else if (word == "source" || word == "osource") {
			path = rest
			gsub(/"/, "", path)
			gsub(/\$\(SRCARCH\)/, srcarch, path)
			if (word == "osource" && (getline line < (srctree "/" path)) <= 0) continue
			close(srctree "/" path)
			readkconfig(srctree "/" path)
		}
	}
	if (ok < 0) {
		printf "%s: can't open file \"%s\"\n", file, file > "/dev/stderr"
		exit 1
	}
	close(file)
}

# The expression evaluator: tokens in tok[1..ntok], position pos.
function evaluate(expr,   s, n, i, t) {
	if (expr == "") return 1
	s = expr
	gsub(/!=/, " \001 ", s)
	gsub(/&&|\|\||[()!=]/, " & ", s)
	n = split(s, t, /[ \t]+/)
	ntok = 0
	for (i = 1; i <= n; i++) if (t[i] != "") tok[++ntok] = t[i] == "\001" ? "!=" : t[i]
	pos = 1
	return evor()
}

function evor(   v, r) {
	v = evand()
	while (pos <= ntok && tok[pos] == "||") { pos++; r = evand(); v = v || r }
	return v
}

function evand(   v, r) {
	v = evnot()
	while (pos <= ntok && tok[pos] == "&&") { pos++; r = evnot(); v = v && r }
	return v
}

function evnot() {
	if (tok[pos] == "!") { pos++; return !evnot() }
	return evatom()
}

function evatom(   v, a, op, b) {
	if (tok[pos] == "(") { pos++; v = evor(); pos++; return v }
	a = tok[pos++]
	if (pos <= ntok && (tok[pos] == "=" || tok[pos] == "!=")) {
		op = tok[pos++]; b = tok[pos++]
		return (op == "=") == (symvalue(a) == symvalue(b))
	}
	v = symvalue(a)
	return v == "y" || v == "m"
}

function symvalue(s,   v) {
	if (s in val) return val[s]
	if (s in declared) return type[s] == "bool" || type[s] == "tristate" ? "n" : ""
	v = s
	gsub(/"/, "", v)
	return v
}

# The defaults of sym: the first whose condition holds.
function defaultof(sym,   i, v) {
	for (i = 1; i <= ndefs[sym]; i++) {
		if (evaluate(defcond[sym, i])) {
			v = defval[sym, i]
			if (v in declared) return symvalue(v)
			gsub(/"/, "", v)
			return v
		}
	}
	return type[sym] == "bool" || type[sym] == "tristate" ? "n" : ""
}

# chosen is the alternative choice n takes.
function chosen(n,   list, k, i, u) {
	k = split(members[n], list, " ")
	u = userchoice[n]
	if (u != "" && evaluate(dep[u])) return u
	u = choicedefault[n]
	if (u != "" && evaluate(dep[u])) return u
	for (i = 1; i <= k; i++) if (evaluate(dep[list[i]])) return list[i]
	return ""
}

function compute(sym,   v, n) {
	n = choiceof[sym]
	if (n != "") return evaluate(choicedep[n]) && chosen(n) == sym ? "y" : "n"
	if (type[sym] == "bool" || type[sym] == "tristate") {
		if (selected[sym]) return "y"
		if (!evaluate(dep[sym])) return "n"
		if (prompt[sym] && (sym in user) && user[sym] ~ /^[ymn]$/) {
			v = user[sym]
			return v == "m" && type[sym] == "bool" ? "y" : v
		}
		return defaultof(sym)
	}
	if (!evaluate(dep[sym])) return ""
	if (prompt[sym] && (sym in user)) return user[sym]
	return defaultof(sym)
}

# The .config read: the last word on each symbol counts.
/^CONFIG_[A-Za-z0-9_]+=/ {
	sym = substr($0, 8, index($0, "=") - 8)
	v = substr($0, index($0, "=") + 1)
	if (v ~ /^".*"$/) v = substr(v, 2, length(v) - 2)
	user[sym] = v
	if (v == "y" && choiceof[sym] != "") userchoice[choiceof[sym]] = sym
	next
}
/^# CONFIG_[A-Za-z0-9_]+ is not set$/ {
	user[substr($2, 8)] = "n"
	next
}

END {
	for (round = 1; round <= 20; round++) {
		split("", selected)
		for (i = 1; i <= nsyms; i++) {
			s = order[i]
			if (val[s] != "y" && val[s] != "m") continue
			for (j = 1; j <= nsel[s]; j++) if (evaluate(selcond[s, j])) selected[selsym[s, j]] = 1
		}
		changed = 0
		for (i = 1; i <= nsyms; i++) {
			s = order[i]
			v = compute(s)
			if (!(s in val) || val[s] != v) { val[s] = v; changed = 1 }
		}
		if (!changed) break
	}
	print "#"
	print "# Automatically generated file; DO NOT EDIT."
	printf "# Linux/%s %s Kernel Configuration\n", srcarch, kernelversion
	print "#"
	for (i = 1; i <= nsyms; i++) {
		s = order[i]
		v = val[s]
		if (type[s] == "bool" || type[s] == "tristate") {
			if (v == "y" || v == "m") printf "CONFIG_%s=%s\n", s, v
			else if (prompt[s] && evaluate(dep[s]) && (choiceof[s] == "" || evaluate(choicedep[choiceof[s]]))) printf "# CONFIG_%s is not set\n", s
		} else if (type[s] == "string") {
			if (evaluate(dep[s])) printf "CONFIG_%s=\"%s\"\n", s, v
		} else if (v != "") {
			printf "CONFIG_%s=%s\n", s, v
		}
	}
}
