var __create = Object.create;
var __defProp = Object.defineProperty;
var __getOwnPropDesc = Object.getOwnPropertyDescriptor;
var __getOwnPropNames = Object.getOwnPropertyNames;
var __getProtoOf = Object.getPrototypeOf;
var __hasOwnProp = Object.prototype.hasOwnProperty;
var __commonJS = (cb, mod) => function __require() {
  try {
    return mod || (0, cb[__getOwnPropNames(cb)[0]])((mod = { exports: {} }).exports, mod), mod.exports;
  } catch (e) {
    throw mod = 0, e;
  }
};
var __copyProps = (to, from, except, desc) => {
  if (from && typeof from === "object" || typeof from === "function") {
    for (let key of __getOwnPropNames(from))
      if (!__hasOwnProp.call(to, key) && key !== except)
        __defProp(to, key, { get: () => from[key], enumerable: !(desc = __getOwnPropDesc(from, key)) || desc.enumerable });
  }
  return to;
};
var __toESM = (mod, isNodeMode, target) => (target = mod != null ? __create(__getProtoOf(mod)) : {}, __copyProps(
  // If the importer is in node compatibility mode or this is not an ESM
  // file that has been converted to a CommonJS file using a Babel-
  // compatible transform (i.e. "__esModule" has not been set), then set
  // "default" to the CommonJS "module.exports" for node compatibility.
  isNodeMode || !mod || !mod.__esModule ? __defProp(target, "default", { value: mod, enumerable: true }) : target,
  mod
));

// node_modules/diff-match-patch/index.js
var require_diff_match_patch = __commonJS({
  "node_modules/diff-match-patch/index.js"(exports, module) {
    var diff_match_patch = function() {
      this.Diff_Timeout = 1;
      this.Diff_EditCost = 4;
      this.Match_Threshold = 0.5;
      this.Match_Distance = 1e3;
      this.Patch_DeleteThreshold = 0.5;
      this.Patch_Margin = 4;
      this.Match_MaxBits = 32;
    };
    var DIFF_DELETE = -1;
    var DIFF_INSERT = 1;
    var DIFF_EQUAL = 0;
    diff_match_patch.Diff = function(op, text) {
      return [op, text];
    };
    diff_match_patch.prototype.diff_main = function(text1, text2, opt_checklines, opt_deadline) {
      if (typeof opt_deadline == "undefined") {
        if (this.Diff_Timeout <= 0) {
          opt_deadline = Number.MAX_VALUE;
        } else {
          opt_deadline = (/* @__PURE__ */ new Date()).getTime() + this.Diff_Timeout * 1e3;
        }
      }
      var deadline = opt_deadline;
      if (text1 == null || text2 == null) {
        throw new Error("Null input. (diff_main)");
      }
      if (text1 == text2) {
        if (text1) {
          return [new diff_match_patch.Diff(DIFF_EQUAL, text1)];
        }
        return [];
      }
      if (typeof opt_checklines == "undefined") {
        opt_checklines = true;
      }
      var checklines = opt_checklines;
      var commonlength = this.diff_commonPrefix(text1, text2);
      var commonprefix = text1.substring(0, commonlength);
      text1 = text1.substring(commonlength);
      text2 = text2.substring(commonlength);
      commonlength = this.diff_commonSuffix(text1, text2);
      var commonsuffix = text1.substring(text1.length - commonlength);
      text1 = text1.substring(0, text1.length - commonlength);
      text2 = text2.substring(0, text2.length - commonlength);
      var diffs = this.diff_compute_(text1, text2, checklines, deadline);
      if (commonprefix) {
        diffs.unshift(new diff_match_patch.Diff(DIFF_EQUAL, commonprefix));
      }
      if (commonsuffix) {
        diffs.push(new diff_match_patch.Diff(DIFF_EQUAL, commonsuffix));
      }
      this.diff_cleanupMerge(diffs);
      return diffs;
    };
    diff_match_patch.prototype.diff_compute_ = function(text1, text2, checklines, deadline) {
      var diffs;
      if (!text1) {
        return [new diff_match_patch.Diff(DIFF_INSERT, text2)];
      }
      if (!text2) {
        return [new diff_match_patch.Diff(DIFF_DELETE, text1)];
      }
      var longtext = text1.length > text2.length ? text1 : text2;
      var shorttext = text1.length > text2.length ? text2 : text1;
      var i = longtext.indexOf(shorttext);
      if (i != -1) {
        diffs = [
          new diff_match_patch.Diff(DIFF_INSERT, longtext.substring(0, i)),
          new diff_match_patch.Diff(DIFF_EQUAL, shorttext),
          new diff_match_patch.Diff(
            DIFF_INSERT,
            longtext.substring(i + shorttext.length)
          )
        ];
        if (text1.length > text2.length) {
          diffs[0][0] = diffs[2][0] = DIFF_DELETE;
        }
        return diffs;
      }
      if (shorttext.length == 1) {
        return [
          new diff_match_patch.Diff(DIFF_DELETE, text1),
          new diff_match_patch.Diff(DIFF_INSERT, text2)
        ];
      }
      var hm = this.diff_halfMatch_(text1, text2);
      if (hm) {
        var text1_a = hm[0];
        var text1_b = hm[1];
        var text2_a = hm[2];
        var text2_b = hm[3];
        var mid_common = hm[4];
        var diffs_a = this.diff_main(text1_a, text2_a, checklines, deadline);
        var diffs_b = this.diff_main(text1_b, text2_b, checklines, deadline);
        return diffs_a.concat(
          [new diff_match_patch.Diff(DIFF_EQUAL, mid_common)],
          diffs_b
        );
      }
      if (checklines && text1.length > 100 && text2.length > 100) {
        return this.diff_lineMode_(text1, text2, deadline);
      }
      return this.diff_bisect_(text1, text2, deadline);
    };
    diff_match_patch.prototype.diff_lineMode_ = function(text1, text2, deadline) {
      var a = this.diff_linesToChars_(text1, text2);
      text1 = a.chars1;
      text2 = a.chars2;
      var linearray = a.lineArray;
      var diffs = this.diff_main(text1, text2, false, deadline);
      this.diff_charsToLines_(diffs, linearray);
      this.diff_cleanupSemantic(diffs);
      diffs.push(new diff_match_patch.Diff(DIFF_EQUAL, ""));
      var pointer = 0;
      var count_delete = 0;
      var count_insert = 0;
      var text_delete = "";
      var text_insert = "";
      while (pointer < diffs.length) {
        switch (diffs[pointer][0]) {
          case DIFF_INSERT:
            count_insert++;
            text_insert += diffs[pointer][1];
            break;
          case DIFF_DELETE:
            count_delete++;
            text_delete += diffs[pointer][1];
            break;
          case DIFF_EQUAL:
            if (count_delete >= 1 && count_insert >= 1) {
              diffs.splice(
                pointer - count_delete - count_insert,
                count_delete + count_insert
              );
              pointer = pointer - count_delete - count_insert;
              var subDiff = this.diff_main(text_delete, text_insert, false, deadline);
              for (var j = subDiff.length - 1; j >= 0; j--) {
                diffs.splice(pointer, 0, subDiff[j]);
              }
              pointer = pointer + subDiff.length;
            }
            count_insert = 0;
            count_delete = 0;
            text_delete = "";
            text_insert = "";
            break;
        }
        pointer++;
      }
      diffs.pop();
      return diffs;
    };
    diff_match_patch.prototype.diff_bisect_ = function(text1, text2, deadline) {
      var text1_length = text1.length;
      var text2_length = text2.length;
      var max_d = Math.ceil((text1_length + text2_length) / 2);
      var v_offset = max_d;
      var v_length = 2 * max_d;
      var v1 = new Array(v_length);
      var v2 = new Array(v_length);
      for (var x = 0; x < v_length; x++) {
        v1[x] = -1;
        v2[x] = -1;
      }
      v1[v_offset + 1] = 0;
      v2[v_offset + 1] = 0;
      var delta = text1_length - text2_length;
      var front = delta % 2 != 0;
      var k1start = 0;
      var k1end = 0;
      var k2start = 0;
      var k2end = 0;
      for (var d = 0; d < max_d; d++) {
        if ((/* @__PURE__ */ new Date()).getTime() > deadline) {
          break;
        }
        for (var k1 = -d + k1start; k1 <= d - k1end; k1 += 2) {
          var k1_offset = v_offset + k1;
          var x1;
          if (k1 == -d || k1 != d && v1[k1_offset - 1] < v1[k1_offset + 1]) {
            x1 = v1[k1_offset + 1];
          } else {
            x1 = v1[k1_offset - 1] + 1;
          }
          var y1 = x1 - k1;
          while (x1 < text1_length && y1 < text2_length && text1.charAt(x1) == text2.charAt(y1)) {
            x1++;
            y1++;
          }
          v1[k1_offset] = x1;
          if (x1 > text1_length) {
            k1end += 2;
          } else if (y1 > text2_length) {
            k1start += 2;
          } else if (front) {
            var k2_offset = v_offset + delta - k1;
            if (k2_offset >= 0 && k2_offset < v_length && v2[k2_offset] != -1) {
              var x2 = text1_length - v2[k2_offset];
              if (x1 >= x2) {
                return this.diff_bisectSplit_(text1, text2, x1, y1, deadline);
              }
            }
          }
        }
        for (var k2 = -d + k2start; k2 <= d - k2end; k2 += 2) {
          var k2_offset = v_offset + k2;
          var x2;
          if (k2 == -d || k2 != d && v2[k2_offset - 1] < v2[k2_offset + 1]) {
            x2 = v2[k2_offset + 1];
          } else {
            x2 = v2[k2_offset - 1] + 1;
          }
          var y2 = x2 - k2;
          while (x2 < text1_length && y2 < text2_length && text1.charAt(text1_length - x2 - 1) == text2.charAt(text2_length - y2 - 1)) {
            x2++;
            y2++;
          }
          v2[k2_offset] = x2;
          if (x2 > text1_length) {
            k2end += 2;
          } else if (y2 > text2_length) {
            k2start += 2;
          } else if (!front) {
            var k1_offset = v_offset + delta - k2;
            if (k1_offset >= 0 && k1_offset < v_length && v1[k1_offset] != -1) {
              var x1 = v1[k1_offset];
              var y1 = v_offset + x1 - k1_offset;
              x2 = text1_length - x2;
              if (x1 >= x2) {
                return this.diff_bisectSplit_(text1, text2, x1, y1, deadline);
              }
            }
          }
        }
      }
      return [
        new diff_match_patch.Diff(DIFF_DELETE, text1),
        new diff_match_patch.Diff(DIFF_INSERT, text2)
      ];
    };
    diff_match_patch.prototype.diff_bisectSplit_ = function(text1, text2, x, y, deadline) {
      var text1a = text1.substring(0, x);
      var text2a = text2.substring(0, y);
      var text1b = text1.substring(x);
      var text2b = text2.substring(y);
      var diffs = this.diff_main(text1a, text2a, false, deadline);
      var diffsb = this.diff_main(text1b, text2b, false, deadline);
      return diffs.concat(diffsb);
    };
    diff_match_patch.prototype.diff_linesToChars_ = function(text1, text2) {
      var lineArray = [];
      var lineHash = {};
      lineArray[0] = "";
      function diff_linesToCharsMunge_(text) {
        var chars = "";
        var lineStart = 0;
        var lineEnd = -1;
        var lineArrayLength = lineArray.length;
        while (lineEnd < text.length - 1) {
          lineEnd = text.indexOf("\n", lineStart);
          if (lineEnd == -1) {
            lineEnd = text.length - 1;
          }
          var line = text.substring(lineStart, lineEnd + 1);
          if (lineHash.hasOwnProperty ? lineHash.hasOwnProperty(line) : lineHash[line] !== void 0) {
            chars += String.fromCharCode(lineHash[line]);
          } else {
            if (lineArrayLength == maxLines) {
              line = text.substring(lineStart);
              lineEnd = text.length;
            }
            chars += String.fromCharCode(lineArrayLength);
            lineHash[line] = lineArrayLength;
            lineArray[lineArrayLength++] = line;
          }
          lineStart = lineEnd + 1;
        }
        return chars;
      }
      var maxLines = 4e4;
      var chars1 = diff_linesToCharsMunge_(text1);
      maxLines = 65535;
      var chars2 = diff_linesToCharsMunge_(text2);
      return { chars1, chars2, lineArray };
    };
    diff_match_patch.prototype.diff_charsToLines_ = function(diffs, lineArray) {
      for (var i = 0; i < diffs.length; i++) {
        var chars = diffs[i][1];
        var text = [];
        for (var j = 0; j < chars.length; j++) {
          text[j] = lineArray[chars.charCodeAt(j)];
        }
        diffs[i][1] = text.join("");
      }
    };
    diff_match_patch.prototype.diff_commonPrefix = function(text1, text2) {
      if (!text1 || !text2 || text1.charAt(0) != text2.charAt(0)) {
        return 0;
      }
      var pointermin = 0;
      var pointermax = Math.min(text1.length, text2.length);
      var pointermid = pointermax;
      var pointerstart = 0;
      while (pointermin < pointermid) {
        if (text1.substring(pointerstart, pointermid) == text2.substring(pointerstart, pointermid)) {
          pointermin = pointermid;
          pointerstart = pointermin;
        } else {
          pointermax = pointermid;
        }
        pointermid = Math.floor((pointermax - pointermin) / 2 + pointermin);
      }
      return pointermid;
    };
    diff_match_patch.prototype.diff_commonSuffix = function(text1, text2) {
      if (!text1 || !text2 || text1.charAt(text1.length - 1) != text2.charAt(text2.length - 1)) {
        return 0;
      }
      var pointermin = 0;
      var pointermax = Math.min(text1.length, text2.length);
      var pointermid = pointermax;
      var pointerend = 0;
      while (pointermin < pointermid) {
        if (text1.substring(text1.length - pointermid, text1.length - pointerend) == text2.substring(text2.length - pointermid, text2.length - pointerend)) {
          pointermin = pointermid;
          pointerend = pointermin;
        } else {
          pointermax = pointermid;
        }
        pointermid = Math.floor((pointermax - pointermin) / 2 + pointermin);
      }
      return pointermid;
    };
    diff_match_patch.prototype.diff_commonOverlap_ = function(text1, text2) {
      var text1_length = text1.length;
      var text2_length = text2.length;
      if (text1_length == 0 || text2_length == 0) {
        return 0;
      }
      if (text1_length > text2_length) {
        text1 = text1.substring(text1_length - text2_length);
      } else if (text1_length < text2_length) {
        text2 = text2.substring(0, text1_length);
      }
      var text_length = Math.min(text1_length, text2_length);
      if (text1 == text2) {
        return text_length;
      }
      var best = 0;
      var length = 1;
      while (true) {
        var pattern = text1.substring(text_length - length);
        var found = text2.indexOf(pattern);
        if (found == -1) {
          return best;
        }
        length += found;
        if (found == 0 || text1.substring(text_length - length) == text2.substring(0, length)) {
          best = length;
          length++;
        }
      }
    };
    diff_match_patch.prototype.diff_halfMatch_ = function(text1, text2) {
      if (this.Diff_Timeout <= 0) {
        return null;
      }
      var longtext = text1.length > text2.length ? text1 : text2;
      var shorttext = text1.length > text2.length ? text2 : text1;
      if (longtext.length < 4 || shorttext.length * 2 < longtext.length) {
        return null;
      }
      var dmp = this;
      function diff_halfMatchI_(longtext2, shorttext2, i) {
        var seed = longtext2.substring(i, i + Math.floor(longtext2.length / 4));
        var j = -1;
        var best_common = "";
        var best_longtext_a, best_longtext_b, best_shorttext_a, best_shorttext_b;
        while ((j = shorttext2.indexOf(seed, j + 1)) != -1) {
          var prefixLength = dmp.diff_commonPrefix(
            longtext2.substring(i),
            shorttext2.substring(j)
          );
          var suffixLength = dmp.diff_commonSuffix(
            longtext2.substring(0, i),
            shorttext2.substring(0, j)
          );
          if (best_common.length < suffixLength + prefixLength) {
            best_common = shorttext2.substring(j - suffixLength, j) + shorttext2.substring(j, j + prefixLength);
            best_longtext_a = longtext2.substring(0, i - suffixLength);
            best_longtext_b = longtext2.substring(i + prefixLength);
            best_shorttext_a = shorttext2.substring(0, j - suffixLength);
            best_shorttext_b = shorttext2.substring(j + prefixLength);
          }
        }
        if (best_common.length * 2 >= longtext2.length) {
          return [
            best_longtext_a,
            best_longtext_b,
            best_shorttext_a,
            best_shorttext_b,
            best_common
          ];
        } else {
          return null;
        }
      }
      var hm1 = diff_halfMatchI_(
        longtext,
        shorttext,
        Math.ceil(longtext.length / 4)
      );
      var hm2 = diff_halfMatchI_(
        longtext,
        shorttext,
        Math.ceil(longtext.length / 2)
      );
      var hm;
      if (!hm1 && !hm2) {
        return null;
      } else if (!hm2) {
        hm = hm1;
      } else if (!hm1) {
        hm = hm2;
      } else {
        hm = hm1[4].length > hm2[4].length ? hm1 : hm2;
      }
      var text1_a, text1_b, text2_a, text2_b;
      if (text1.length > text2.length) {
        text1_a = hm[0];
        text1_b = hm[1];
        text2_a = hm[2];
        text2_b = hm[3];
      } else {
        text2_a = hm[0];
        text2_b = hm[1];
        text1_a = hm[2];
        text1_b = hm[3];
      }
      var mid_common = hm[4];
      return [text1_a, text1_b, text2_a, text2_b, mid_common];
    };
    diff_match_patch.prototype.diff_cleanupSemantic = function(diffs) {
      var changes = false;
      var equalities = [];
      var equalitiesLength = 0;
      var lastEquality = null;
      var pointer = 0;
      var length_insertions1 = 0;
      var length_deletions1 = 0;
      var length_insertions2 = 0;
      var length_deletions2 = 0;
      while (pointer < diffs.length) {
        if (diffs[pointer][0] == DIFF_EQUAL) {
          equalities[equalitiesLength++] = pointer;
          length_insertions1 = length_insertions2;
          length_deletions1 = length_deletions2;
          length_insertions2 = 0;
          length_deletions2 = 0;
          lastEquality = diffs[pointer][1];
        } else {
          if (diffs[pointer][0] == DIFF_INSERT) {
            length_insertions2 += diffs[pointer][1].length;
          } else {
            length_deletions2 += diffs[pointer][1].length;
          }
          if (lastEquality && lastEquality.length <= Math.max(length_insertions1, length_deletions1) && lastEquality.length <= Math.max(
            length_insertions2,
            length_deletions2
          )) {
            diffs.splice(
              equalities[equalitiesLength - 1],
              0,
              new diff_match_patch.Diff(DIFF_DELETE, lastEquality)
            );
            diffs[equalities[equalitiesLength - 1] + 1][0] = DIFF_INSERT;
            equalitiesLength--;
            equalitiesLength--;
            pointer = equalitiesLength > 0 ? equalities[equalitiesLength - 1] : -1;
            length_insertions1 = 0;
            length_deletions1 = 0;
            length_insertions2 = 0;
            length_deletions2 = 0;
            lastEquality = null;
            changes = true;
          }
        }
        pointer++;
      }
      if (changes) {
        this.diff_cleanupMerge(diffs);
      }
      this.diff_cleanupSemanticLossless(diffs);
      pointer = 1;
      while (pointer < diffs.length) {
        if (diffs[pointer - 1][0] == DIFF_DELETE && diffs[pointer][0] == DIFF_INSERT) {
          var deletion = diffs[pointer - 1][1];
          var insertion = diffs[pointer][1];
          var overlap_length1 = this.diff_commonOverlap_(deletion, insertion);
          var overlap_length2 = this.diff_commonOverlap_(insertion, deletion);
          if (overlap_length1 >= overlap_length2) {
            if (overlap_length1 >= deletion.length / 2 || overlap_length1 >= insertion.length / 2) {
              diffs.splice(pointer, 0, new diff_match_patch.Diff(
                DIFF_EQUAL,
                insertion.substring(0, overlap_length1)
              ));
              diffs[pointer - 1][1] = deletion.substring(0, deletion.length - overlap_length1);
              diffs[pointer + 1][1] = insertion.substring(overlap_length1);
              pointer++;
            }
          } else {
            if (overlap_length2 >= deletion.length / 2 || overlap_length2 >= insertion.length / 2) {
              diffs.splice(pointer, 0, new diff_match_patch.Diff(
                DIFF_EQUAL,
                deletion.substring(0, overlap_length2)
              ));
              diffs[pointer - 1][0] = DIFF_INSERT;
              diffs[pointer - 1][1] = insertion.substring(0, insertion.length - overlap_length2);
              diffs[pointer + 1][0] = DIFF_DELETE;
              diffs[pointer + 1][1] = deletion.substring(overlap_length2);
              pointer++;
            }
          }
          pointer++;
        }
        pointer++;
      }
    };
    diff_match_patch.prototype.diff_cleanupSemanticLossless = function(diffs) {
      function diff_cleanupSemanticScore_(one, two) {
        if (!one || !two) {
          return 6;
        }
        var char1 = one.charAt(one.length - 1);
        var char2 = two.charAt(0);
        var nonAlphaNumeric1 = char1.match(diff_match_patch.nonAlphaNumericRegex_);
        var nonAlphaNumeric2 = char2.match(diff_match_patch.nonAlphaNumericRegex_);
        var whitespace1 = nonAlphaNumeric1 && char1.match(diff_match_patch.whitespaceRegex_);
        var whitespace2 = nonAlphaNumeric2 && char2.match(diff_match_patch.whitespaceRegex_);
        var lineBreak1 = whitespace1 && char1.match(diff_match_patch.linebreakRegex_);
        var lineBreak2 = whitespace2 && char2.match(diff_match_patch.linebreakRegex_);
        var blankLine1 = lineBreak1 && one.match(diff_match_patch.blanklineEndRegex_);
        var blankLine2 = lineBreak2 && two.match(diff_match_patch.blanklineStartRegex_);
        if (blankLine1 || blankLine2) {
          return 5;
        } else if (lineBreak1 || lineBreak2) {
          return 4;
        } else if (nonAlphaNumeric1 && !whitespace1 && whitespace2) {
          return 3;
        } else if (whitespace1 || whitespace2) {
          return 2;
        } else if (nonAlphaNumeric1 || nonAlphaNumeric2) {
          return 1;
        }
        return 0;
      }
      var pointer = 1;
      while (pointer < diffs.length - 1) {
        if (diffs[pointer - 1][0] == DIFF_EQUAL && diffs[pointer + 1][0] == DIFF_EQUAL) {
          var equality1 = diffs[pointer - 1][1];
          var edit = diffs[pointer][1];
          var equality2 = diffs[pointer + 1][1];
          var commonOffset = this.diff_commonSuffix(equality1, edit);
          if (commonOffset) {
            var commonString = edit.substring(edit.length - commonOffset);
            equality1 = equality1.substring(0, equality1.length - commonOffset);
            edit = commonString + edit.substring(0, edit.length - commonOffset);
            equality2 = commonString + equality2;
          }
          var bestEquality1 = equality1;
          var bestEdit = edit;
          var bestEquality2 = equality2;
          var bestScore = diff_cleanupSemanticScore_(equality1, edit) + diff_cleanupSemanticScore_(edit, equality2);
          while (edit.charAt(0) === equality2.charAt(0)) {
            equality1 += edit.charAt(0);
            edit = edit.substring(1) + equality2.charAt(0);
            equality2 = equality2.substring(1);
            var score = diff_cleanupSemanticScore_(equality1, edit) + diff_cleanupSemanticScore_(edit, equality2);
            if (score >= bestScore) {
              bestScore = score;
              bestEquality1 = equality1;
              bestEdit = edit;
              bestEquality2 = equality2;
            }
          }
          if (diffs[pointer - 1][1] != bestEquality1) {
            if (bestEquality1) {
              diffs[pointer - 1][1] = bestEquality1;
            } else {
              diffs.splice(pointer - 1, 1);
              pointer--;
            }
            diffs[pointer][1] = bestEdit;
            if (bestEquality2) {
              diffs[pointer + 1][1] = bestEquality2;
            } else {
              diffs.splice(pointer + 1, 1);
              pointer--;
            }
          }
        }
        pointer++;
      }
    };
    diff_match_patch.nonAlphaNumericRegex_ = /[^a-zA-Z0-9]/;
    diff_match_patch.whitespaceRegex_ = /\s/;
    diff_match_patch.linebreakRegex_ = /[\r\n]/;
    diff_match_patch.blanklineEndRegex_ = /\n\r?\n$/;
    diff_match_patch.blanklineStartRegex_ = /^\r?\n\r?\n/;
    diff_match_patch.prototype.diff_cleanupEfficiency = function(diffs) {
      var changes = false;
      var equalities = [];
      var equalitiesLength = 0;
      var lastEquality = null;
      var pointer = 0;
      var pre_ins = false;
      var pre_del = false;
      var post_ins = false;
      var post_del = false;
      while (pointer < diffs.length) {
        if (diffs[pointer][0] == DIFF_EQUAL) {
          if (diffs[pointer][1].length < this.Diff_EditCost && (post_ins || post_del)) {
            equalities[equalitiesLength++] = pointer;
            pre_ins = post_ins;
            pre_del = post_del;
            lastEquality = diffs[pointer][1];
          } else {
            equalitiesLength = 0;
            lastEquality = null;
          }
          post_ins = post_del = false;
        } else {
          if (diffs[pointer][0] == DIFF_DELETE) {
            post_del = true;
          } else {
            post_ins = true;
          }
          if (lastEquality && (pre_ins && pre_del && post_ins && post_del || lastEquality.length < this.Diff_EditCost / 2 && pre_ins + pre_del + post_ins + post_del == 3)) {
            diffs.splice(
              equalities[equalitiesLength - 1],
              0,
              new diff_match_patch.Diff(DIFF_DELETE, lastEquality)
            );
            diffs[equalities[equalitiesLength - 1] + 1][0] = DIFF_INSERT;
            equalitiesLength--;
            lastEquality = null;
            if (pre_ins && pre_del) {
              post_ins = post_del = true;
              equalitiesLength = 0;
            } else {
              equalitiesLength--;
              pointer = equalitiesLength > 0 ? equalities[equalitiesLength - 1] : -1;
              post_ins = post_del = false;
            }
            changes = true;
          }
        }
        pointer++;
      }
      if (changes) {
        this.diff_cleanupMerge(diffs);
      }
    };
    diff_match_patch.prototype.diff_cleanupMerge = function(diffs) {
      diffs.push(new diff_match_patch.Diff(DIFF_EQUAL, ""));
      var pointer = 0;
      var count_delete = 0;
      var count_insert = 0;
      var text_delete = "";
      var text_insert = "";
      var commonlength;
      while (pointer < diffs.length) {
        switch (diffs[pointer][0]) {
          case DIFF_INSERT:
            count_insert++;
            text_insert += diffs[pointer][1];
            pointer++;
            break;
          case DIFF_DELETE:
            count_delete++;
            text_delete += diffs[pointer][1];
            pointer++;
            break;
          case DIFF_EQUAL:
            if (count_delete + count_insert > 1) {
              if (count_delete !== 0 && count_insert !== 0) {
                commonlength = this.diff_commonPrefix(text_insert, text_delete);
                if (commonlength !== 0) {
                  if (pointer - count_delete - count_insert > 0 && diffs[pointer - count_delete - count_insert - 1][0] == DIFF_EQUAL) {
                    diffs[pointer - count_delete - count_insert - 1][1] += text_insert.substring(0, commonlength);
                  } else {
                    diffs.splice(0, 0, new diff_match_patch.Diff(
                      DIFF_EQUAL,
                      text_insert.substring(0, commonlength)
                    ));
                    pointer++;
                  }
                  text_insert = text_insert.substring(commonlength);
                  text_delete = text_delete.substring(commonlength);
                }
                commonlength = this.diff_commonSuffix(text_insert, text_delete);
                if (commonlength !== 0) {
                  diffs[pointer][1] = text_insert.substring(text_insert.length - commonlength) + diffs[pointer][1];
                  text_insert = text_insert.substring(0, text_insert.length - commonlength);
                  text_delete = text_delete.substring(0, text_delete.length - commonlength);
                }
              }
              pointer -= count_delete + count_insert;
              diffs.splice(pointer, count_delete + count_insert);
              if (text_delete.length) {
                diffs.splice(
                  pointer,
                  0,
                  new diff_match_patch.Diff(DIFF_DELETE, text_delete)
                );
                pointer++;
              }
              if (text_insert.length) {
                diffs.splice(
                  pointer,
                  0,
                  new diff_match_patch.Diff(DIFF_INSERT, text_insert)
                );
                pointer++;
              }
              pointer++;
            } else if (pointer !== 0 && diffs[pointer - 1][0] == DIFF_EQUAL) {
              diffs[pointer - 1][1] += diffs[pointer][1];
              diffs.splice(pointer, 1);
            } else {
              pointer++;
            }
            count_insert = 0;
            count_delete = 0;
            text_delete = "";
            text_insert = "";
            break;
        }
      }
      if (diffs[diffs.length - 1][1] === "") {
        diffs.pop();
      }
      var changes = false;
      pointer = 1;
      while (pointer < diffs.length - 1) {
        if (diffs[pointer - 1][0] == DIFF_EQUAL && diffs[pointer + 1][0] == DIFF_EQUAL) {
          if (diffs[pointer][1].substring(diffs[pointer][1].length - diffs[pointer - 1][1].length) == diffs[pointer - 1][1]) {
            diffs[pointer][1] = diffs[pointer - 1][1] + diffs[pointer][1].substring(0, diffs[pointer][1].length - diffs[pointer - 1][1].length);
            diffs[pointer + 1][1] = diffs[pointer - 1][1] + diffs[pointer + 1][1];
            diffs.splice(pointer - 1, 1);
            changes = true;
          } else if (diffs[pointer][1].substring(0, diffs[pointer + 1][1].length) == diffs[pointer + 1][1]) {
            diffs[pointer - 1][1] += diffs[pointer + 1][1];
            diffs[pointer][1] = diffs[pointer][1].substring(diffs[pointer + 1][1].length) + diffs[pointer + 1][1];
            diffs.splice(pointer + 1, 1);
            changes = true;
          }
        }
        pointer++;
      }
      if (changes) {
        this.diff_cleanupMerge(diffs);
      }
    };
    diff_match_patch.prototype.diff_xIndex = function(diffs, loc) {
      var chars1 = 0;
      var chars2 = 0;
      var last_chars1 = 0;
      var last_chars2 = 0;
      var x;
      for (x = 0; x < diffs.length; x++) {
        if (diffs[x][0] !== DIFF_INSERT) {
          chars1 += diffs[x][1].length;
        }
        if (diffs[x][0] !== DIFF_DELETE) {
          chars2 += diffs[x][1].length;
        }
        if (chars1 > loc) {
          break;
        }
        last_chars1 = chars1;
        last_chars2 = chars2;
      }
      if (diffs.length != x && diffs[x][0] === DIFF_DELETE) {
        return last_chars2;
      }
      return last_chars2 + (loc - last_chars1);
    };
    diff_match_patch.prototype.diff_prettyHtml = function(diffs) {
      var html = [];
      var pattern_amp = /&/g;
      var pattern_lt = /</g;
      var pattern_gt = />/g;
      var pattern_para = /\n/g;
      for (var x = 0; x < diffs.length; x++) {
        var op = diffs[x][0];
        var data = diffs[x][1];
        var text = data.replace(pattern_amp, "&amp;").replace(pattern_lt, "&lt;").replace(pattern_gt, "&gt;").replace(pattern_para, "&para;<br>");
        switch (op) {
          case DIFF_INSERT:
            html[x] = '<ins style="background:#e6ffe6;">' + text + "</ins>";
            break;
          case DIFF_DELETE:
            html[x] = '<del style="background:#ffe6e6;">' + text + "</del>";
            break;
          case DIFF_EQUAL:
            html[x] = "<span>" + text + "</span>";
            break;
        }
      }
      return html.join("");
    };
    diff_match_patch.prototype.diff_text1 = function(diffs) {
      var text = [];
      for (var x = 0; x < diffs.length; x++) {
        if (diffs[x][0] !== DIFF_INSERT) {
          text[x] = diffs[x][1];
        }
      }
      return text.join("");
    };
    diff_match_patch.prototype.diff_text2 = function(diffs) {
      var text = [];
      for (var x = 0; x < diffs.length; x++) {
        if (diffs[x][0] !== DIFF_DELETE) {
          text[x] = diffs[x][1];
        }
      }
      return text.join("");
    };
    diff_match_patch.prototype.diff_levenshtein = function(diffs) {
      var levenshtein = 0;
      var insertions = 0;
      var deletions = 0;
      for (var x = 0; x < diffs.length; x++) {
        var op = diffs[x][0];
        var data = diffs[x][1];
        switch (op) {
          case DIFF_INSERT:
            insertions += data.length;
            break;
          case DIFF_DELETE:
            deletions += data.length;
            break;
          case DIFF_EQUAL:
            levenshtein += Math.max(insertions, deletions);
            insertions = 0;
            deletions = 0;
            break;
        }
      }
      levenshtein += Math.max(insertions, deletions);
      return levenshtein;
    };
    diff_match_patch.prototype.diff_toDelta = function(diffs) {
      var text = [];
      for (var x = 0; x < diffs.length; x++) {
        switch (diffs[x][0]) {
          case DIFF_INSERT:
            text[x] = "+" + encodeURI(diffs[x][1]);
            break;
          case DIFF_DELETE:
            text[x] = "-" + diffs[x][1].length;
            break;
          case DIFF_EQUAL:
            text[x] = "=" + diffs[x][1].length;
            break;
        }
      }
      return text.join("	").replace(/%20/g, " ");
    };
    diff_match_patch.prototype.diff_fromDelta = function(text1, delta) {
      var diffs = [];
      var diffsLength = 0;
      var pointer = 0;
      var tokens = delta.split(/\t/g);
      for (var x = 0; x < tokens.length; x++) {
        var param = tokens[x].substring(1);
        switch (tokens[x].charAt(0)) {
          case "+":
            try {
              diffs[diffsLength++] = new diff_match_patch.Diff(DIFF_INSERT, decodeURI(param));
            } catch (ex) {
              throw new Error("Illegal escape in diff_fromDelta: " + param);
            }
            break;
          case "-":
          // Fall through.
          case "=":
            var n = parseInt(param, 10);
            if (isNaN(n) || n < 0) {
              throw new Error("Invalid number in diff_fromDelta: " + param);
            }
            var text = text1.substring(pointer, pointer += n);
            if (tokens[x].charAt(0) == "=") {
              diffs[diffsLength++] = new diff_match_patch.Diff(DIFF_EQUAL, text);
            } else {
              diffs[diffsLength++] = new diff_match_patch.Diff(DIFF_DELETE, text);
            }
            break;
          default:
            if (tokens[x]) {
              throw new Error("Invalid diff operation in diff_fromDelta: " + tokens[x]);
            }
        }
      }
      if (pointer != text1.length) {
        throw new Error("Delta length (" + pointer + ") does not equal source text length (" + text1.length + ").");
      }
      return diffs;
    };
    diff_match_patch.prototype.match_main = function(text, pattern, loc) {
      if (text == null || pattern == null || loc == null) {
        throw new Error("Null input. (match_main)");
      }
      loc = Math.max(0, Math.min(loc, text.length));
      if (text == pattern) {
        return 0;
      } else if (!text.length) {
        return -1;
      } else if (text.substring(loc, loc + pattern.length) == pattern) {
        return loc;
      } else {
        return this.match_bitap_(text, pattern, loc);
      }
    };
    diff_match_patch.prototype.match_bitap_ = function(text, pattern, loc) {
      if (pattern.length > this.Match_MaxBits) {
        throw new Error("Pattern too long for this browser.");
      }
      var s = this.match_alphabet_(pattern);
      var dmp = this;
      function match_bitapScore_(e, x) {
        var accuracy = e / pattern.length;
        var proximity = Math.abs(loc - x);
        if (!dmp.Match_Distance) {
          return proximity ? 1 : accuracy;
        }
        return accuracy + proximity / dmp.Match_Distance;
      }
      var score_threshold = this.Match_Threshold;
      var best_loc = text.indexOf(pattern, loc);
      if (best_loc != -1) {
        score_threshold = Math.min(match_bitapScore_(0, best_loc), score_threshold);
        best_loc = text.lastIndexOf(pattern, loc + pattern.length);
        if (best_loc != -1) {
          score_threshold = Math.min(match_bitapScore_(0, best_loc), score_threshold);
        }
      }
      var matchmask = 1 << pattern.length - 1;
      best_loc = -1;
      var bin_min, bin_mid;
      var bin_max = pattern.length + text.length;
      var last_rd;
      for (var d = 0; d < pattern.length; d++) {
        bin_min = 0;
        bin_mid = bin_max;
        while (bin_min < bin_mid) {
          if (match_bitapScore_(d, loc + bin_mid) <= score_threshold) {
            bin_min = bin_mid;
          } else {
            bin_max = bin_mid;
          }
          bin_mid = Math.floor((bin_max - bin_min) / 2 + bin_min);
        }
        bin_max = bin_mid;
        var start2 = Math.max(1, loc - bin_mid + 1);
        var finish = Math.min(loc + bin_mid, text.length) + pattern.length;
        var rd = Array(finish + 2);
        rd[finish + 1] = (1 << d) - 1;
        for (var j = finish; j >= start2; j--) {
          var charMatch = s[text.charAt(j - 1)];
          if (d === 0) {
            rd[j] = (rd[j + 1] << 1 | 1) & charMatch;
          } else {
            rd[j] = (rd[j + 1] << 1 | 1) & charMatch | ((last_rd[j + 1] | last_rd[j]) << 1 | 1) | last_rd[j + 1];
          }
          if (rd[j] & matchmask) {
            var score = match_bitapScore_(d, j - 1);
            if (score <= score_threshold) {
              score_threshold = score;
              best_loc = j - 1;
              if (best_loc > loc) {
                start2 = Math.max(1, 2 * loc - best_loc);
              } else {
                break;
              }
            }
          }
        }
        if (match_bitapScore_(d + 1, loc) > score_threshold) {
          break;
        }
        last_rd = rd;
      }
      return best_loc;
    };
    diff_match_patch.prototype.match_alphabet_ = function(pattern) {
      var s = {};
      for (var i = 0; i < pattern.length; i++) {
        s[pattern.charAt(i)] = 0;
      }
      for (var i = 0; i < pattern.length; i++) {
        s[pattern.charAt(i)] |= 1 << pattern.length - i - 1;
      }
      return s;
    };
    diff_match_patch.prototype.patch_addContext_ = function(patch, text) {
      if (text.length == 0) {
        return;
      }
      if (patch.start2 === null) {
        throw Error("patch not initialized");
      }
      var pattern = text.substring(patch.start2, patch.start2 + patch.length1);
      var padding = 0;
      while (text.indexOf(pattern) != text.lastIndexOf(pattern) && pattern.length < this.Match_MaxBits - this.Patch_Margin - this.Patch_Margin) {
        padding += this.Patch_Margin;
        pattern = text.substring(
          patch.start2 - padding,
          patch.start2 + patch.length1 + padding
        );
      }
      padding += this.Patch_Margin;
      var prefix = text.substring(patch.start2 - padding, patch.start2);
      if (prefix) {
        patch.diffs.unshift(new diff_match_patch.Diff(DIFF_EQUAL, prefix));
      }
      var suffix = text.substring(
        patch.start2 + patch.length1,
        patch.start2 + patch.length1 + padding
      );
      if (suffix) {
        patch.diffs.push(new diff_match_patch.Diff(DIFF_EQUAL, suffix));
      }
      patch.start1 -= prefix.length;
      patch.start2 -= prefix.length;
      patch.length1 += prefix.length + suffix.length;
      patch.length2 += prefix.length + suffix.length;
    };
    diff_match_patch.prototype.patch_make = function(a, opt_b, opt_c) {
      var text1, diffs;
      if (typeof a == "string" && typeof opt_b == "string" && typeof opt_c == "undefined") {
        text1 = /** @type {string} */
        a;
        diffs = this.diff_main(
          text1,
          /** @type {string} */
          opt_b,
          true
        );
        if (diffs.length > 2) {
          this.diff_cleanupSemantic(diffs);
          this.diff_cleanupEfficiency(diffs);
        }
      } else if (a && typeof a == "object" && typeof opt_b == "undefined" && typeof opt_c == "undefined") {
        diffs = /** @type {!Array.<!diff_match_patch.Diff>} */
        a;
        text1 = this.diff_text1(diffs);
      } else if (typeof a == "string" && opt_b && typeof opt_b == "object" && typeof opt_c == "undefined") {
        text1 = /** @type {string} */
        a;
        diffs = /** @type {!Array.<!diff_match_patch.Diff>} */
        opt_b;
      } else if (typeof a == "string" && typeof opt_b == "string" && opt_c && typeof opt_c == "object") {
        text1 = /** @type {string} */
        a;
        diffs = /** @type {!Array.<!diff_match_patch.Diff>} */
        opt_c;
      } else {
        throw new Error("Unknown call format to patch_make.");
      }
      if (diffs.length === 0) {
        return [];
      }
      var patches = [];
      var patch = new diff_match_patch.patch_obj();
      var patchDiffLength = 0;
      var char_count1 = 0;
      var char_count2 = 0;
      var prepatch_text = text1;
      var postpatch_text = text1;
      for (var x = 0; x < diffs.length; x++) {
        var diff_type = diffs[x][0];
        var diff_text = diffs[x][1];
        if (!patchDiffLength && diff_type !== DIFF_EQUAL) {
          patch.start1 = char_count1;
          patch.start2 = char_count2;
        }
        switch (diff_type) {
          case DIFF_INSERT:
            patch.diffs[patchDiffLength++] = diffs[x];
            patch.length2 += diff_text.length;
            postpatch_text = postpatch_text.substring(0, char_count2) + diff_text + postpatch_text.substring(char_count2);
            break;
          case DIFF_DELETE:
            patch.length1 += diff_text.length;
            patch.diffs[patchDiffLength++] = diffs[x];
            postpatch_text = postpatch_text.substring(0, char_count2) + postpatch_text.substring(char_count2 + diff_text.length);
            break;
          case DIFF_EQUAL:
            if (diff_text.length <= 2 * this.Patch_Margin && patchDiffLength && diffs.length != x + 1) {
              patch.diffs[patchDiffLength++] = diffs[x];
              patch.length1 += diff_text.length;
              patch.length2 += diff_text.length;
            } else if (diff_text.length >= 2 * this.Patch_Margin) {
              if (patchDiffLength) {
                this.patch_addContext_(patch, prepatch_text);
                patches.push(patch);
                patch = new diff_match_patch.patch_obj();
                patchDiffLength = 0;
                prepatch_text = postpatch_text;
                char_count1 = char_count2;
              }
            }
            break;
        }
        if (diff_type !== DIFF_INSERT) {
          char_count1 += diff_text.length;
        }
        if (diff_type !== DIFF_DELETE) {
          char_count2 += diff_text.length;
        }
      }
      if (patchDiffLength) {
        this.patch_addContext_(patch, prepatch_text);
        patches.push(patch);
      }
      return patches;
    };
    diff_match_patch.prototype.patch_deepCopy = function(patches) {
      var patchesCopy = [];
      for (var x = 0; x < patches.length; x++) {
        var patch = patches[x];
        var patchCopy = new diff_match_patch.patch_obj();
        patchCopy.diffs = [];
        for (var y = 0; y < patch.diffs.length; y++) {
          patchCopy.diffs[y] = new diff_match_patch.Diff(patch.diffs[y][0], patch.diffs[y][1]);
        }
        patchCopy.start1 = patch.start1;
        patchCopy.start2 = patch.start2;
        patchCopy.length1 = patch.length1;
        patchCopy.length2 = patch.length2;
        patchesCopy[x] = patchCopy;
      }
      return patchesCopy;
    };
    diff_match_patch.prototype.patch_apply = function(patches, text) {
      if (patches.length == 0) {
        return [text, []];
      }
      patches = this.patch_deepCopy(patches);
      var nullPadding = this.patch_addPadding(patches);
      text = nullPadding + text + nullPadding;
      this.patch_splitMax(patches);
      var delta = 0;
      var results = [];
      for (var x = 0; x < patches.length; x++) {
        var expected_loc = patches[x].start2 + delta;
        var text1 = this.diff_text1(patches[x].diffs);
        var start_loc;
        var end_loc = -1;
        if (text1.length > this.Match_MaxBits) {
          start_loc = this.match_main(
            text,
            text1.substring(0, this.Match_MaxBits),
            expected_loc
          );
          if (start_loc != -1) {
            end_loc = this.match_main(
              text,
              text1.substring(text1.length - this.Match_MaxBits),
              expected_loc + text1.length - this.Match_MaxBits
            );
            if (end_loc == -1 || start_loc >= end_loc) {
              start_loc = -1;
            }
          }
        } else {
          start_loc = this.match_main(text, text1, expected_loc);
        }
        if (start_loc == -1) {
          results[x] = false;
          delta -= patches[x].length2 - patches[x].length1;
        } else {
          results[x] = true;
          delta = start_loc - expected_loc;
          var text2;
          if (end_loc == -1) {
            text2 = text.substring(start_loc, start_loc + text1.length);
          } else {
            text2 = text.substring(start_loc, end_loc + this.Match_MaxBits);
          }
          if (text1 == text2) {
            text = text.substring(0, start_loc) + this.diff_text2(patches[x].diffs) + text.substring(start_loc + text1.length);
          } else {
            var diffs = this.diff_main(text1, text2, false);
            if (text1.length > this.Match_MaxBits && this.diff_levenshtein(diffs) / text1.length > this.Patch_DeleteThreshold) {
              results[x] = false;
            } else {
              this.diff_cleanupSemanticLossless(diffs);
              var index1 = 0;
              var index2;
              for (var y = 0; y < patches[x].diffs.length; y++) {
                var mod = patches[x].diffs[y];
                if (mod[0] !== DIFF_EQUAL) {
                  index2 = this.diff_xIndex(diffs, index1);
                }
                if (mod[0] === DIFF_INSERT) {
                  text = text.substring(0, start_loc + index2) + mod[1] + text.substring(start_loc + index2);
                } else if (mod[0] === DIFF_DELETE) {
                  text = text.substring(0, start_loc + index2) + text.substring(start_loc + this.diff_xIndex(
                    diffs,
                    index1 + mod[1].length
                  ));
                }
                if (mod[0] !== DIFF_DELETE) {
                  index1 += mod[1].length;
                }
              }
            }
          }
        }
      }
      text = text.substring(nullPadding.length, text.length - nullPadding.length);
      return [text, results];
    };
    diff_match_patch.prototype.patch_addPadding = function(patches) {
      var paddingLength = this.Patch_Margin;
      var nullPadding = "";
      for (var x = 1; x <= paddingLength; x++) {
        nullPadding += String.fromCharCode(x);
      }
      for (var x = 0; x < patches.length; x++) {
        patches[x].start1 += paddingLength;
        patches[x].start2 += paddingLength;
      }
      var patch = patches[0];
      var diffs = patch.diffs;
      if (diffs.length == 0 || diffs[0][0] != DIFF_EQUAL) {
        diffs.unshift(new diff_match_patch.Diff(DIFF_EQUAL, nullPadding));
        patch.start1 -= paddingLength;
        patch.start2 -= paddingLength;
        patch.length1 += paddingLength;
        patch.length2 += paddingLength;
      } else if (paddingLength > diffs[0][1].length) {
        var extraLength = paddingLength - diffs[0][1].length;
        diffs[0][1] = nullPadding.substring(diffs[0][1].length) + diffs[0][1];
        patch.start1 -= extraLength;
        patch.start2 -= extraLength;
        patch.length1 += extraLength;
        patch.length2 += extraLength;
      }
      patch = patches[patches.length - 1];
      diffs = patch.diffs;
      if (diffs.length == 0 || diffs[diffs.length - 1][0] != DIFF_EQUAL) {
        diffs.push(new diff_match_patch.Diff(DIFF_EQUAL, nullPadding));
        patch.length1 += paddingLength;
        patch.length2 += paddingLength;
      } else if (paddingLength > diffs[diffs.length - 1][1].length) {
        var extraLength = paddingLength - diffs[diffs.length - 1][1].length;
        diffs[diffs.length - 1][1] += nullPadding.substring(0, extraLength);
        patch.length1 += extraLength;
        patch.length2 += extraLength;
      }
      return nullPadding;
    };
    diff_match_patch.prototype.patch_splitMax = function(patches) {
      var patch_size = this.Match_MaxBits;
      for (var x = 0; x < patches.length; x++) {
        if (patches[x].length1 <= patch_size) {
          continue;
        }
        var bigpatch = patches[x];
        patches.splice(x--, 1);
        var start1 = bigpatch.start1;
        var start2 = bigpatch.start2;
        var precontext = "";
        while (bigpatch.diffs.length !== 0) {
          var patch = new diff_match_patch.patch_obj();
          var empty = true;
          patch.start1 = start1 - precontext.length;
          patch.start2 = start2 - precontext.length;
          if (precontext !== "") {
            patch.length1 = patch.length2 = precontext.length;
            patch.diffs.push(new diff_match_patch.Diff(DIFF_EQUAL, precontext));
          }
          while (bigpatch.diffs.length !== 0 && patch.length1 < patch_size - this.Patch_Margin) {
            var diff_type = bigpatch.diffs[0][0];
            var diff_text = bigpatch.diffs[0][1];
            if (diff_type === DIFF_INSERT) {
              patch.length2 += diff_text.length;
              start2 += diff_text.length;
              patch.diffs.push(bigpatch.diffs.shift());
              empty = false;
            } else if (diff_type === DIFF_DELETE && patch.diffs.length == 1 && patch.diffs[0][0] == DIFF_EQUAL && diff_text.length > 2 * patch_size) {
              patch.length1 += diff_text.length;
              start1 += diff_text.length;
              empty = false;
              patch.diffs.push(new diff_match_patch.Diff(diff_type, diff_text));
              bigpatch.diffs.shift();
            } else {
              diff_text = diff_text.substring(
                0,
                patch_size - patch.length1 - this.Patch_Margin
              );
              patch.length1 += diff_text.length;
              start1 += diff_text.length;
              if (diff_type === DIFF_EQUAL) {
                patch.length2 += diff_text.length;
                start2 += diff_text.length;
              } else {
                empty = false;
              }
              patch.diffs.push(new diff_match_patch.Diff(diff_type, diff_text));
              if (diff_text == bigpatch.diffs[0][1]) {
                bigpatch.diffs.shift();
              } else {
                bigpatch.diffs[0][1] = bigpatch.diffs[0][1].substring(diff_text.length);
              }
            }
          }
          precontext = this.diff_text2(patch.diffs);
          precontext = precontext.substring(precontext.length - this.Patch_Margin);
          var postcontext = this.diff_text1(bigpatch.diffs).substring(0, this.Patch_Margin);
          if (postcontext !== "") {
            patch.length1 += postcontext.length;
            patch.length2 += postcontext.length;
            if (patch.diffs.length !== 0 && patch.diffs[patch.diffs.length - 1][0] === DIFF_EQUAL) {
              patch.diffs[patch.diffs.length - 1][1] += postcontext;
            } else {
              patch.diffs.push(new diff_match_patch.Diff(DIFF_EQUAL, postcontext));
            }
          }
          if (!empty) {
            patches.splice(++x, 0, patch);
          }
        }
      }
    };
    diff_match_patch.prototype.patch_toText = function(patches) {
      var text = [];
      for (var x = 0; x < patches.length; x++) {
        text[x] = patches[x];
      }
      return text.join("");
    };
    diff_match_patch.prototype.patch_fromText = function(textline) {
      var patches = [];
      if (!textline) {
        return patches;
      }
      var text = textline.split("\n");
      var textPointer = 0;
      var patchHeader = /^@@ -(\d+),?(\d*) \+(\d+),?(\d*) @@$/;
      while (textPointer < text.length) {
        var m = text[textPointer].match(patchHeader);
        if (!m) {
          throw new Error("Invalid patch string: " + text[textPointer]);
        }
        var patch = new diff_match_patch.patch_obj();
        patches.push(patch);
        patch.start1 = parseInt(m[1], 10);
        if (m[2] === "") {
          patch.start1--;
          patch.length1 = 1;
        } else if (m[2] == "0") {
          patch.length1 = 0;
        } else {
          patch.start1--;
          patch.length1 = parseInt(m[2], 10);
        }
        patch.start2 = parseInt(m[3], 10);
        if (m[4] === "") {
          patch.start2--;
          patch.length2 = 1;
        } else if (m[4] == "0") {
          patch.length2 = 0;
        } else {
          patch.start2--;
          patch.length2 = parseInt(m[4], 10);
        }
        textPointer++;
        while (textPointer < text.length) {
          var sign = text[textPointer].charAt(0);
          try {
            var line = decodeURI(text[textPointer].substring(1));
          } catch (ex) {
            throw new Error("Illegal escape in patch_fromText: " + line);
          }
          if (sign == "-") {
            patch.diffs.push(new diff_match_patch.Diff(DIFF_DELETE, line));
          } else if (sign == "+") {
            patch.diffs.push(new diff_match_patch.Diff(DIFF_INSERT, line));
          } else if (sign == " ") {
            patch.diffs.push(new diff_match_patch.Diff(DIFF_EQUAL, line));
          } else if (sign == "@") {
            break;
          } else if (sign === "") {
          } else {
            throw new Error('Invalid patch mode "' + sign + '" in: ' + line);
          }
          textPointer++;
        }
      }
      return patches;
    };
    diff_match_patch.patch_obj = function() {
      this.diffs = [];
      this.start1 = null;
      this.start2 = null;
      this.length1 = 0;
      this.length2 = 0;
    };
    diff_match_patch.patch_obj.prototype.toString = function() {
      var coords1, coords2;
      if (this.length1 === 0) {
        coords1 = this.start1 + ",0";
      } else if (this.length1 == 1) {
        coords1 = this.start1 + 1;
      } else {
        coords1 = this.start1 + 1 + "," + this.length1;
      }
      if (this.length2 === 0) {
        coords2 = this.start2 + ",0";
      } else if (this.length2 == 1) {
        coords2 = this.start2 + 1;
      } else {
        coords2 = this.start2 + 1 + "," + this.length2;
      }
      var text = ["@@ -" + coords1 + " +" + coords2 + " @@\n"];
      var op;
      for (var x = 0; x < this.diffs.length; x++) {
        switch (this.diffs[x][0]) {
          case DIFF_INSERT:
            op = "+";
            break;
          case DIFF_DELETE:
            op = "-";
            break;
          case DIFF_EQUAL:
            op = " ";
            break;
        }
        text[x + 1] = op + encodeURI(this.diffs[x][1]) + "\n";
      }
      return text.join("").replace(/%20/g, " ");
    };
    module.exports = diff_match_patch;
    module.exports["diff_match_patch"] = diff_match_patch;
    module.exports["DIFF_DELETE"] = DIFF_DELETE;
    module.exports["DIFF_INSERT"] = DIFF_INSERT;
    module.exports["DIFF_EQUAL"] = DIFF_EQUAL;
  }
});

// src/answers.ts
var FAQ_LABEL_TEXT = "From FAQ";
var ASK_ASSISTANT_LABEL = "Ask the assistant instead";
var RATING_BUTTONS = [
  { rating: "up", text: "👍", label: "Good answer" },
  { rating: "down", text: "👎", label: "Bad answer" }
];
function isFinishedAnswer(status) {
  return status === "complete" || status === "stopped";
}
function canAskAssistant(s) {
  return s.source === "faq" && !s.busy && s.newestAnswerId !== null && s.messageId === s.newestAnswerId;
}
function pressedStates(rating) {
  return { up: rating === "up" ? "true" : "false", down: rating === "down" ? "true" : "false" };
}

// src/format.ts
function ms(v) {
  return `${Math.round(v)} ms`;
}
function formatAnswerStats(s) {
  const parts = [];
  if (s.clientTtftMs !== null) {
    parts.push(`first token ${ms(s.clientTtftMs)}` + (s.serverTtftMs !== null ? ` (server ${ms(s.serverTtftMs)})` : ""));
  } else if (s.serverTtftMs !== null) {
    parts.push(`first token (server) ${ms(s.serverTtftMs)}`);
  }
  if (s.completionTokens) {
    parts.push(`${s.completionTokens} ${s.completionTokens === 1 ? "token" : "tokens"}`);
  }
  if (s.status === "stopped") parts.push("stopped");
  else if (s.status === "failed") parts.push("failed");
  else if (s.finishReason === "length") parts.push("length limit reached");
  return parts.join(" · ");
}

// src/protocol.ts
function resumeFrame(id, messageId, lastSeq) {
  return { type: "chat.resume", id, message_id: messageId, last_seq: Math.max(0, Math.floor(lastSeq)) };
}
function sendFrame(id, conversationId, text) {
  return { type: "chat.send", id, conversation_id: conversationId, text };
}
function templatedSendFrame(id, template, variables, payload) {
  const frame = {
    type: "chat.send",
    id,
    conversation_id: null,
    template: { id: template.id, version: template.version, sha256: template.sha256 },
    variables: { ...variables }
  };
  if (payload.kind === "exact") {
    frame.result_sha256 = payload.resultSha256;
  } else if (payload.kind === "patch") {
    frame.patch = payload.patch;
    frame.result_sha256 = payload.resultSha256;
  } else if (payload.kind === "text") {
    frame.text = payload.text;
  }
  return frame;
}
function withFullText(frame, text) {
  const { patch: _patch, result_sha256: _sha, text: _text, ...rest } = frame;
  return { ...rest, text };
}
function stopFrame(id, messageId) {
  return messageId === null ? { type: "chat.stop", id } : { type: "chat.stop", id, message_id: messageId };
}
function regenerateFrame(id, messageId, bypassFaq) {
  return { type: "chat.regenerate", id, message_id: messageId, bypass_faq: bypassFaq };
}
function feedbackFrame(id, messageId, rating) {
  return { type: "chat.feedback", id, message_id: messageId, rating };
}
function parseSource(v) {
  return v === "faq" ? "faq" : "model";
}
function parseRating(v) {
  return v === "up" || v === "down" ? v : null;
}
function isObj(v) {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
function str(o, key) {
  const v = o[key];
  return typeof v === "string" ? v : void 0;
}
function strOrNull(o, key) {
  const v = o[key];
  if (v === null || v === void 0) return null;
  return typeof v === "string" ? v : void 0;
}
function numOrNull(o, key) {
  const v = o[key];
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}
function faqEntryId(v) {
  return typeof v === "number" && Number.isSafeInteger(v) ? v : null;
}
function parseUsage(v) {
  const o = isObj(v) ? v : {};
  return {
    prompt_tokens: numOrNull(o, "prompt_tokens"),
    completion_tokens: numOrNull(o, "completion_tokens"),
    cached_prompt_tokens: numOrNull(o, "cached_prompt_tokens")
  };
}
function parseTimings(v) {
  const o = isObj(v) ? v : {};
  return {
    queue_wait_ms: numOrNull(o, "queue_wait_ms"),
    ttft_ms: numOrNull(o, "ttft_ms"),
    total_ms: numOrNull(o, "total_ms")
  };
}
function parseServerFrame(raw) {
  if (typeof raw !== "string") return null;
  let data;
  try {
    data = JSON.parse(raw);
  } catch {
    return null;
  }
  if (!isObj(data)) return null;
  switch (data["type"]) {
    case "chat.accepted": {
      const id = str(data, "id");
      const conversation_id = str(data, "conversation_id");
      const user_message_id = str(data, "user_message_id");
      const assistant_message_id = str(data, "assistant_message_id");
      if (id === void 0 || conversation_id === void 0 || user_message_id === void 0 || assistant_message_id === void 0) {
        return null;
      }
      return { type: "chat.accepted", id, conversation_id, user_message_id, assistant_message_id };
    }
    case "chat.delta": {
      const message_id = str(data, "message_id");
      const text = str(data, "text");
      const seq = data["seq"];
      if (message_id === void 0 || text === void 0 || typeof seq !== "number" || !Number.isInteger(seq)) {
        return null;
      }
      return { type: "chat.delta", message_id, seq, text };
    }
    case "chat.done": {
      const message_id = str(data, "message_id");
      const status = data["status"];
      if (message_id === void 0 || status !== "complete" && status !== "stopped") return null;
      return {
        type: "chat.done",
        message_id,
        status,
        finish_reason: str(data, "finish_reason") ?? "",
        usage: parseUsage(data["usage"]),
        timings: parseTimings(data["timings"]),
        source: parseSource(data["source"]),
        faq_entry_id: faqEntryId(data["faq_entry_id"])
      };
    }
    case "chat.feedback_recorded": {
      const id = str(data, "id");
      const message_id = str(data, "message_id");
      const rating = parseRating(data["rating"]);
      if (id === void 0 || message_id === void 0 || rating === null) return null;
      return { type: "chat.feedback_recorded", id, message_id, rating };
    }
    case "chat.error": {
      const id = strOrNull(data, "id");
      const message_id = strOrNull(data, "message_id");
      const code = str(data, "code");
      const message = str(data, "message");
      if (id === void 0 || message_id === void 0 || code === void 0 || message === void 0) return null;
      const retry = data["retry_after_s"];
      const retry_after_s = typeof retry === "number" && Number.isFinite(retry) && retry >= 0 ? retry : null;
      return { type: "chat.error", id, message_id, code, message, retry_after_s };
    }
    case "chat.snapshot": {
      const message_id = str(data, "message_id");
      const content = str(data, "content");
      if (message_id === void 0 || content === void 0) return null;
      return { type: "chat.snapshot", message_id, content };
    }
    case "chat.resend_full": {
      const id = str(data, "id");
      if (id === void 0) return null;
      return { type: "chat.resend_full", id, reason: str(data, "reason") ?? "" };
    }
    case "templates.changed": {
      const etag = strOrNull(data, "etag");
      return { type: "templates.changed", etag: etag ?? null };
    }
    default:
      return null;
  }
}

// src/socket.ts
var BACKOFF_INITIAL_MS = 500;
var BACKOFF_MAX_MS = 8e3;
function backoffDelay(attempt, initialMs = BACKOFF_INITIAL_MS, maxMs = BACKOFF_MAX_MS) {
  if (!(attempt > 0)) return Math.min(initialMs, maxMs);
  return Math.min(maxMs, initialMs * 2 ** Math.min(attempt, 30));
}
function chatSocketUrl(loc, path = "/ws/chat/") {
  const scheme = loc.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${loc.host}${path}`;
}
var OPEN = 1;
var ReconnectingSocket = class {
  constructor(url, handlers = {}, options = {}) {
    this.url = url;
    this.handlers = handlers;
    this.socket = null;
    this.attempt = 0;
    this.timer = null;
    this.stopped = false;
    this.createSocket = options.createSocket ?? ((u) => new WebSocket(u));
    this.setTimer = options.setTimer ?? ((fn, ms2) => setTimeout(fn, ms2));
    this.clearTimer = options.clearTimer ?? ((h) => clearTimeout(h));
    this.initialDelayMs = options.initialDelayMs ?? BACKOFF_INITIAL_MS;
    this.maxDelayMs = options.maxDelayMs ?? BACKOFF_MAX_MS;
  }
  get connected() {
    return this.socket !== null && this.socket.readyState === OPEN;
  }
  start() {
    this.stopped = false;
    if (this.socket === null && this.timer === null) this.connect("connecting");
  }
  /** Send a frame; returns false (and sends nothing) when the socket is not open. */
  send(data) {
    if (!this.connected || this.socket === null) return false;
    try {
      this.socket.send(data);
      return true;
    } catch {
      return false;
    }
  }
  /** Close for good (no reconnect). */
  stop() {
    this.stopped = true;
    if (this.timer !== null) {
      this.clearTimer(this.timer);
      this.timer = null;
    }
    const s = this.socket;
    this.socket = null;
    if (s !== null) {
      s.onopen = s.onclose = s.onerror = s.onmessage = null;
      s.close();
    }
  }
  connect(state) {
    this.timer = null;
    this.handlers.onState?.(state, null);
    let s;
    try {
      s = this.createSocket(this.url);
    } catch {
      this.scheduleReconnect();
      return;
    }
    this.socket = s;
    s.onopen = () => {
      if (this.socket !== s) return;
      this.attempt = 0;
      this.handlers.onState?.("connected", null);
      this.handlers.onOpen?.();
    };
    s.onmessage = (ev) => {
      if (this.socket !== s) return;
      this.handlers.onMessage?.(ev.data);
    };
    s.onerror = () => void 0;
    s.onclose = () => {
      if (this.socket !== s) return;
      s.onopen = s.onclose = s.onerror = s.onmessage = null;
      this.socket = null;
      this.handlers.onClose?.();
      this.scheduleReconnect();
    };
  }
  scheduleReconnect() {
    if (this.stopped) return;
    const delay = backoffDelay(this.attempt, this.initialDelayMs, this.maxDelayMs);
    this.attempt += 1;
    this.handlers.onState?.("reconnecting", delay);
    this.timer = this.setTimer(() => this.connect("reconnecting"), delay);
  }
};

// src/textpatch.ts
var import_diff_match_patch = __toESM(require_diff_match_patch(), 1);
var MAX_PATCH_CHARS = 16e3;
var PatchError = class extends Error {
  constructor() {
    super(...arguments);
    this.name = "PatchError";
  }
};
var DELETE = -1;
var EQUAL = 0;
var INSERT = 1;
function makePatch(base, edited) {
  requireWellFormed(base, "base");
  requireWellFormed(edited, "edited");
  if (base === edited) return "";
  const dmp = newDmp();
  const diffs = dmp.diff_main(base, edited, true);
  if (diffs.length > 2) {
    dmp.diff_cleanupSemantic(diffs);
    dmp.diff_cleanupEfficiency(diffs);
  }
  const hunks = dmp.patch_make(base, keepSurrogatePairs(base, edited, diffs));
  let text;
  let ok;
  try {
    text = dmp.patch_toText(hunks);
    ok = applyHunks(base, parse(text)) === edited;
  } catch (err) {
    throw new PatchError(`internal error: the computed patch is invalid (${String(err)})`);
  }
  if (!ok) throw new PatchError("internal error: the computed patch does not reproduce the edit");
  return text;
}
async function sha256Hex(text, subtle = globalThis.crypto?.subtle) {
  if (subtle && typeof subtle.digest === "function") {
    try {
      const digest = await subtle.digest("SHA-256", new TextEncoder().encode(text));
      return toHex(new Uint8Array(digest));
    } catch {
    }
  }
  return sha256HexSync(text);
}
function newDmp() {
  const dmp = new import_diff_match_patch.default();
  dmp.diff_linesToChars_ = linesToChars;
  dmp.patch_addContext_ = (patch, text) => addContext(dmp, patch, text);
  return dmp;
}
function linesToChars(text1, text2) {
  const lineArray = [""];
  const lineHash = /* @__PURE__ */ new Map();
  const munge = (text, maxLines) => {
    let chars = "";
    let lineStart = 0;
    let lineEnd = -1;
    while (lineEnd < text.length - 1) {
      lineEnd = text.indexOf("\n", lineStart);
      if (lineEnd === -1) lineEnd = text.length - 1;
      let line = text.substring(lineStart, lineEnd + 1);
      const known = lineHash.get(line);
      if (known !== void 0) {
        chars += String.fromCharCode(known);
      } else {
        if (lineArray.length === maxLines) {
          line = text.substring(lineStart);
          lineEnd = text.length;
        }
        chars += String.fromCharCode(lineArray.length);
        lineHash.set(line, lineArray.length);
        lineArray.push(line);
      }
      lineStart = lineEnd + 1;
    }
    return chars;
  };
  const chars1 = munge(text1, 4e4);
  const chars2 = munge(text2, 65535);
  return { chars1, chars2, lineArray };
}
function addContext(dmp, patch, text) {
  if (text.length === 0) return;
  const margin = dmp.Patch_Margin;
  const start2 = patch.start2;
  const length = patch.length1;
  let pattern = text.substring(start2, start2 + length);
  let padding = 0;
  while (text.indexOf(pattern) !== text.lastIndexOf(pattern) && pattern.length < dmp.Match_MaxBits - 2 * margin) {
    padding += margin;
    pattern = text.substring(Math.max(0, start2 - padding), start2 + length + padding);
  }
  padding += margin;
  let prefixStart = Math.max(0, start2 - padding);
  if (splitsPair(text, prefixStart)) prefixStart -= 1;
  let suffixEnd = Math.min(text.length, start2 + length + padding);
  if (splitsPair(text, suffixEnd)) suffixEnd += 1;
  const prefix = text.substring(prefixStart, start2);
  if (prefix) patch.diffs.unshift([EQUAL, prefix]);
  const suffix = text.substring(start2 + length, suffixEnd);
  if (suffix) patch.diffs.push([EQUAL, suffix]);
  patch.start1 -= prefix.length;
  patch.start2 -= prefix.length;
  patch.length1 += prefix.length + suffix.length;
  patch.length2 += prefix.length + suffix.length;
}
var isHigh = (code) => code >= 55296 && code <= 56319;
var isLow = (code) => code >= 56320 && code <= 57343;
function splitsPair(text, pos) {
  return pos > 0 && pos < text.length && isHigh(text.charCodeAt(pos - 1)) && isLow(text.charCodeAt(pos));
}
function keepSurrogatePairs(text1, text2, diffs) {
  const regions = [];
  let i1 = 0;
  let i2 = 0;
  let current = null;
  for (const [op, text] of diffs) {
    if (op === EQUAL) {
      current = null;
      i1 += text.length;
      i2 += text.length;
      continue;
    }
    if (current === null) {
      current = { a1: i1, a2: i2, b1: i1, b2: i2, diffs: [], rebuild: false };
      regions.push(current);
    }
    current.diffs.push([op, text]);
    if (op === DELETE) i1 += text.length;
    else i2 += text.length;
    current.b1 = i1;
    current.b2 = i2;
  }
  const merged = [];
  for (const region of regions) {
    region.rebuild = region.diffs.some(
      ([, text]) => text.length > 0 && (isLow(text.charCodeAt(0)) || isHigh(text.charCodeAt(text.length - 1)))
    );
    if (splitsPair(text1, region.a1) || splitsPair(text2, region.a2)) {
      region.a1 -= 1;
      region.a2 -= 1;
      region.rebuild = true;
    }
    if (splitsPair(text1, region.b1) || splitsPair(text2, region.b2)) {
      region.b1 += 1;
      region.b2 += 1;
      region.rebuild = true;
    }
    const previous = merged[merged.length - 1];
    if (previous !== void 0 && previous.b1 >= region.a1) {
      previous.b1 = region.b1;
      previous.b2 = region.b2;
      previous.rebuild = true;
    } else {
      merged.push(region);
    }
  }
  if (!merged.some((region) => region.rebuild)) return diffs;
  const out = [];
  let pos1 = 0;
  for (const region of merged) {
    if (region.a1 > pos1) out.push([EQUAL, text1.substring(pos1, region.a1)]);
    if (region.rebuild) {
      if (region.b1 > region.a1) out.push([DELETE, text1.substring(region.a1, region.b1)]);
      if (region.b2 > region.a2) out.push([INSERT, text2.substring(region.a2, region.b2)]);
    } else {
      out.push(...region.diffs);
    }
    pos1 = region.b1;
  }
  if (pos1 < text1.length) out.push([EQUAL, text1.substring(pos1)]);
  return out;
}
function parse(text) {
  const dmp = newDmp();
  let hunks;
  let canonical;
  try {
    hunks = dmp.patch_fromText(text);
    canonical = dmp.patch_toText(hunks);
  } catch (err) {
    throw new PatchError(`malformed patch: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (canonical !== text) throw new PatchError("malformed patch: not in canonical diff-match-patch form");
  return hunks;
}
function applyHunks(text, hunks) {
  hunks.forEach((hunk, index) => {
    let oldText = "";
    let newText = "";
    for (const [op, data] of hunk.diffs) {
      if (op !== INSERT) oldText += data;
      if (op !== DELETE) newText += data;
    }
    if (oldText.length !== hunk.length1 || newText.length !== hunk.length2) {
      throw new PatchError(`malformed patch: hunk ${index + 1} lengths do not match its body`);
    }
    const start2 = hunk.start2;
    if (hunk.start1 < 0 || start2 < 0 || start2 > text.length || text.substring(start2, start2 + oldText.length) !== oldText) {
      throw new PatchError(`hunk ${index + 1} does not match the base text`);
    }
    text = text.substring(0, start2) + newText + text.substring(start2 + oldText.length);
  });
  return text;
}
function isWellFormed(text) {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (isHigh(code)) {
      if (!isLow(text.charCodeAt(i + 1))) return false;
      i++;
    } else if (isLow(code)) {
      return false;
    }
  }
  return true;
}
function requireWellFormed(text, name) {
  if (!isWellFormed(text)) throw new PatchError(`${name} contains an unpaired surrogate`);
}
var K = new Uint32Array([
  1116352408,
  1899447441,
  3049323471,
  3921009573,
  961987163,
  1508970993,
  2453635748,
  2870763221,
  3624381080,
  310598401,
  607225278,
  1426881987,
  1925078388,
  2162078206,
  2614888103,
  3248222580,
  3835390401,
  4022224774,
  264347078,
  604807628,
  770255983,
  1249150122,
  1555081692,
  1996064986,
  2554220882,
  2821834349,
  2952996808,
  3210313671,
  3336571891,
  3584528711,
  113926993,
  338241895,
  666307205,
  773529912,
  1294757372,
  1396182291,
  1695183700,
  1986661051,
  2177026350,
  2456956037,
  2730485921,
  2820302411,
  3259730800,
  3345764771,
  3516065817,
  3600352804,
  4094571909,
  275423344,
  430227734,
  506948616,
  659060556,
  883997877,
  958139571,
  1322822218,
  1537002063,
  1747873779,
  1955562222,
  2024104815,
  2227730452,
  2361852424,
  2428436474,
  2756734187,
  3204031479,
  3329325298
]);
var rotr = (x, n) => x >>> n | x << 32 - n;
function sha256HexSync(text) {
  const data = new TextEncoder().encode(text);
  const blocks = Math.ceil((data.length + 9) / 64);
  const bytes = new Uint8Array(blocks * 64);
  bytes.set(data);
  bytes[data.length] = 128;
  const view = new DataView(bytes.buffer);
  view.setUint32(bytes.length - 8, Math.floor(data.length / 536870912));
  view.setUint32(bytes.length - 4, data.length << 3 >>> 0);
  const h = new Uint32Array([1779033703, 3144134277, 1013904242, 2773480762, 1359893119, 2600822924, 528734635, 1541459225]);
  const w = new Uint32Array(64);
  for (let offset = 0; offset < bytes.length; offset += 64) {
    for (let i = 0; i < 16; i++) w[i] = view.getUint32(offset + i * 4);
    for (let i = 16; i < 64; i++) {
      const x = w[i - 15];
      const y = w[i - 2];
      const s0 = rotr(x, 7) ^ rotr(x, 18) ^ x >>> 3;
      const s1 = rotr(y, 17) ^ rotr(y, 19) ^ y >>> 10;
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    let a = h[0];
    let b = h[1];
    let c = h[2];
    let d = h[3];
    let e = h[4];
    let f = h[5];
    let g = h[6];
    let hh = h[7];
    for (let i = 0; i < 64; i++) {
      const t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + (e & f ^ ~e & g) + K[i] + w[i] | 0;
      const t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + (a & b ^ a & c ^ b & c) | 0;
      hh = g;
      g = f;
      f = e;
      e = d + t1 | 0;
      d = c;
      c = b;
      b = a;
      a = t1 + t2 | 0;
    }
    h[0] = h[0] + a;
    h[1] = h[1] + b;
    h[2] = h[2] + c;
    h[3] = h[3] + d;
    h[4] = h[4] + e;
    h[5] = h[5] + f;
    h[6] = h[6] + g;
    h[7] = h[7] + hh;
  }
  return toHex(bigEndian(h));
}
function bigEndian(words) {
  const out = new Uint8Array(words.length * 4);
  const view = new DataView(out.buffer);
  words.forEach((word, i) => view.setUint32(i * 4, word));
  return out;
}
function toHex(bytes) {
  let out = "";
  for (const byte of bytes) out += byte.toString(16).padStart(2, "0");
  return out;
}

// src/templates.ts
var PLACEHOLDER = /\{\{([a-z_][a-z0-9_]*)\}\}/g;
function valueString(v) {
  if (typeof v === "string") return v;
  return Number.isInteger(v) ? BigInt(v).toString() : String(v);
}
function renderBody(body, variables) {
  return body.replace(PLACEHOLDER, (whole, name) => {
    if (!Object.prototype.hasOwnProperty.call(variables, name)) return whole;
    const v = variables[name];
    return v === void 0 ? whole : valueString(v);
  });
}
var INTEGER = /^[+-]?[0-9]+$/;
function codePoints(s) {
  let n = 0;
  for (const _ of s) n++;
  return n;
}
function parseInteger(raw) {
  const t = raw.trim();
  if (!INTEGER.test(t)) return null;
  const n = Number(t);
  return Number.isSafeInteger(n) ? n : null;
}
function validateVariables(template, values) {
  const entries = [];
  const errors = [];
  const fail = (v, code, message) => {
    errors.push({ name: v.name, label: v.label, code, message: `${v.label}: ${message}` });
  };
  for (const v of template.variables) {
    const raw = Object.prototype.hasOwnProperty.call(values, v.name) ? values[v.name] ?? "" : "";
    const empty = raw.trim() === "";
    if (empty && v.required) {
      fail(v, "required", "this field is required.");
      continue;
    }
    if (v.type !== "string" && empty) {
      entries.push([v.name, ""]);
      continue;
    }
    switch (v.type) {
      case "integer": {
        const n = parseInteger(raw);
        if (n === null) fail(v, "integer", "enter a whole number.");
        else entries.push([v.name, n]);
        break;
      }
      case "choice": {
        if (!v.choices.includes(raw)) fail(v, "choice", "choose one of the options.");
        else entries.push([v.name, raw]);
        break;
      }
      default: {
        if (v.max_length !== null && codePoints(raw) > v.max_length) {
          fail(v, "max_length", `at most ${v.max_length} characters.`);
        } else {
          entries.push([v.name, raw]);
        }
      }
    }
  }
  return { variables: Object.fromEntries(entries), errors };
}
function previewVariables(template, values) {
  const { variables, errors } = validateVariables(template, values);
  const out = [];
  const bad = new Set(errors.map((e) => e.name));
  for (const [k, v] of Object.entries(variables)) {
    if (!bad.has(k) && v !== "") out.push([k, v]);
  }
  return Object.fromEntries(out);
}
var defaultTools = { makePatch, sha256Hex };
async function buildTemplatedSend(id, template, variables, edited, tools = defaultTools) {
  const base = renderBody(template.body, variables);
  if (edited === base) {
    const resultSha256 = await tools.sha256Hex(edited);
    return templatedSendFrame(id, template, variables, { kind: "exact", resultSha256 });
  }
  try {
    const patch = tools.makePatch(base, edited);
    if (patch.length <= MAX_PATCH_CHARS && patch.length + 64 < edited.length) {
      const resultSha256 = await tools.sha256Hex(edited);
      return templatedSendFrame(id, template, variables, { kind: "patch", patch, resultSha256 });
    }
  } catch (err) {
    console.warn("chat: cannot build a template patch, sending the full text", err);
  }
  return templatedSendFrame(id, template, variables, { kind: "text", text: edited });
}
var TemplateDraft = class {
  constructor() {
    this.template = null;
    /** The latest rendered body (the render of `template` with the previewed values). */
    this.base = "";
  }
  /** True while the textbox holds nothing the user typed themselves. */
  untouched(text) {
    return text === this.base;
  }
  select(template, values, text) {
    const auto = this.untouched(text);
    this.template = template;
    this.base = template === null ? "" : renderBody(template.body, previewVariables(template, values));
    return auto ? this.base : null;
  }
  update(values, text) {
    if (this.template === null) return null;
    return this.select(this.template, values, text);
  }
  clear() {
    this.template = null;
    this.base = "";
  }
};
function isObj2(v) {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
function parseVariable(v) {
  if (!isObj2(v)) return null;
  const name = v["name"];
  if (typeof name !== "string" || name === "") return null;
  const type = v["type"];
  const label = typeof v["label"] === "string" && v["label"] !== "" ? v["label"] : name;
  const maxLength = v["max_length"];
  const choices = Array.isArray(v["choices"]) ? v["choices"].filter((c) => typeof c === "string") : [];
  return {
    name,
    label,
    // An unknown type is treated as free text; the server still validates.
    type: type === "integer" || type === "choice" ? type : "string",
    required: v["required"] !== false,
    // the server's default
    max_length: typeof maxLength === "number" && Number.isInteger(maxLength) && maxLength >= 0 ? maxLength : null,
    choices
  };
}
function parseTemplate(t) {
  if (!isObj2(t)) return null;
  const { id, version, sha256, name, body } = t;
  if (typeof id !== "number" || !Number.isInteger(id)) return null;
  if (typeof version !== "number" || !Number.isInteger(version)) return null;
  if (typeof sha256 !== "string" || typeof body !== "string") return null;
  const variables = [];
  for (const raw of Array.isArray(t["variables"]) ? t["variables"] : []) {
    const v = parseVariable(raw);
    if (v === null) return null;
    variables.push(v);
  }
  return {
    id,
    version,
    sha256,
    name: typeof name === "string" && name !== "" ? name : `Template ${id}`,
    description: typeof t["description"] === "string" ? t["description"] : "",
    body,
    variables
  };
}
function parseTemplateList(data) {
  if (!isObj2(data) || !Array.isArray(data["templates"])) return null;
  const out = [];
  for (const t of data["templates"]) {
    const parsed = parseTemplate(t);
    if (parsed !== null) out.push(parsed);
  }
  return out;
}
var TEMPLATES_URL = "/api/templates/";
var TEMPLATES_STORAGE_KEY = "chat.templates.v1";
function sameEtag(a, b) {
  const bare = (t) => t.trim().replace(/^W\//, "").replace(/^"(.*)"$/, "$1");
  return bare(a) === bare(b);
}
var TemplateStore = class {
  constructor(options) {
    this.list = [];
    this.tag = null;
    this.listeners = /* @__PURE__ */ new Set();
    this.running = null;
    this.rerun = false;
    this.fetchFn = options.fetch;
    this.storage = options.storage;
    this.url = options.url ?? TEMPLATES_URL;
    this.key = options.storageKey ?? TEMPLATES_STORAGE_KEY;
  }
  get templates() {
    return this.list;
  }
  get etag() {
    return this.tag;
  }
  find(id) {
    return this.list.find((t) => t.id === id) ?? null;
  }
  /** Call `fn` whenever the list is replaced; returns the unsubscribe function. */
  subscribe(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }
  /** Read the cached list (if any). A broken cache is ignored, and its ETag with it. */
  load() {
    let raw = null;
    try {
      raw = this.storage?.getItem(this.key) ?? null;
    } catch {
      raw = null;
    }
    if (raw === null) return;
    let stored;
    try {
      stored = JSON.parse(raw);
    } catch {
      return;
    }
    if (!isObj2(stored)) return;
    const list = parseTemplateList({ templates: stored["templates"] });
    if (list === null) return;
    this.list = list;
    this.tag = typeof stored["etag"] === "string" ? stored["etag"] : null;
    this.emit();
  }
  /**
   * `GET /api/templates/` with `If-None-Match`. Concurrent calls share one request; a call
   * made while a request is in flight (e.g. a `templates.changed` push) runs one more
   * request after it, since the one in flight may predate the change.
   */
  revalidate() {
    if (this.running !== null) {
      this.rerun = true;
      return this.running;
    }
    const run = async () => {
      try {
        let outcome;
        do {
          this.rerun = false;
          outcome = await this.fetchOnce();
        } while (this.rerun);
        return outcome;
      } finally {
        this.running = null;
      }
    };
    this.running = run();
    return this.running;
  }
  /** The socket pushed `templates.changed`; nothing to do when we already have that ETag. */
  changed(etag) {
    if (etag !== null && this.tag !== null && sameEtag(etag, this.tag) && this.running === null) return Promise.resolve("not-modified");
    return this.revalidate();
  }
  async fetchOnce() {
    const headers = { Accept: "application/json" };
    if (this.tag !== null) headers["If-None-Match"] = this.tag;
    try {
      const res = await this.fetchFn(this.url, { headers, credentials: "same-origin", cache: "no-store" });
      if (res.status === 304) return "not-modified";
      if (res.status !== 200) {
        console.warn(`chat: templates: HTTP ${res.status}, keeping the cached list`);
        return "error";
      }
      const list = parseTemplateList(await res.json());
      if (list === null) {
        console.warn("chat: templates: unexpected response, keeping the cached list");
        return "error";
      }
      this.list = list;
      this.tag = res.headers.get("ETag");
      this.persist();
      this.emit();
      return "updated";
    } catch (err) {
      console.warn("chat: templates: cannot revalidate, keeping the cached list", err);
      return "error";
    }
  }
  persist() {
    const stored = { etag: this.tag, templates: this.list };
    try {
      this.storage?.setItem(this.key, JSON.stringify(stored));
    } catch {
    }
  }
  emit() {
    for (const fn of Array.from(this.listeners)) {
      try {
        fn(this.list);
      } catch (err) {
        console.error("chat: templates listener failed", err);
      }
    }
  }
};
function browserStorage() {
  try {
    return globalThis.localStorage ?? null;
  } catch {
    return null;
  }
}

// src/view.ts
var MessageView = class {
  constructor(doc, role, status, messageId, content = "") {
    this.text = null;
    this.meta = null;
    /** The row under a finished answer: FAQ label, "Ask the assistant instead", ratings. */
    this.actions = null;
    this.askButton = null;
    this.rateButtons = [];
    this.currentRating = null;
    const el = doc.createElement("div");
    el.className = `message message-${role}`;
    el.dataset["role"] = role;
    if (messageId !== null) el.dataset["messageId"] = messageId;
    this.element = el;
    this.setStatus(status);
    if (content !== "") this.append(content);
  }
  get messageId() {
    return this.element.dataset["messageId"] ?? null;
  }
  set messageId(id) {
    if (id === null) delete this.element.dataset["messageId"];
    else this.element.dataset["messageId"] = id;
  }
  get status() {
    return this.element.dataset["status"] ?? "";
  }
  setStatus(status) {
    setMessageStatus(this.element, status);
  }
  /** Append text without touching what is already rendered (extends one text node). */
  append(text) {
    if (text === "") return;
    if (this.text === null) {
      this.text = this.element.ownerDocument.createTextNode(text);
      this.element.appendChild(this.text);
    } else {
      this.text.appendData(text);
    }
  }
  /**
   * The small muted line under the message. It is a sibling of the message element (not a
   * child), so the message element's text is exactly the message content.
   */
  setMeta(line, data = {}) {
    if (this.meta === null) {
      const meta = this.element.ownerDocument.createElement("p");
      meta.className = `message-meta message-meta-${this.element.dataset["role"] ?? ""}`;
      this.element.after(meta);
      this.meta = meta;
    }
    this.meta.textContent = line;
    for (const [k, v] of Object.entries(data)) this.meta.dataset[k] = v;
    if (this.messageId !== null) this.meta.dataset["for"] = this.messageId;
  }
  /** "faq" or "model" once the answer is finished (`data-source`); "model" before. */
  get source() {
    return parseSource(this.element.dataset["source"]);
  }
  get rating() {
    return this.currentRating;
  }
  /**
   * Label a finished answer with its source (`data-source` on the message element) and add
   * the row of controls under it (a sibling, like the stats line, so the message element's
   * text stays exactly the answer): for a FAQ answer the "From FAQ" label (`.faq-label`) and
   * "Ask the assistant instead", then "Good answer" / "Bad answer". Replaces an earlier row.
   */
  showAnswerActions(source, rating, handlers) {
    this.removeActions();
    const doc = this.element.ownerDocument;
    const id = this.messageId;
    this.element.dataset["source"] = source;
    const row = doc.createElement("div");
    row.className = "message-actions";
    row.setAttribute("role", "group");
    row.setAttribute("aria-label", "Answer actions");
    if (id !== null) row.dataset["for"] = id;
    if (source === "faq") {
      const label = doc.createElement("span");
      label.className = "faq-label";
      label.textContent = FAQ_LABEL_TEXT;
      if (id !== null) {
        label.id = `faq-label-${id}`;
        this.element.setAttribute("aria-describedby", label.id);
      }
      const ask = doc.createElement("button");
      ask.type = "button";
      ask.className = "message-action ask-assistant";
      ask.textContent = ASK_ASSISTANT_LABEL;
      ask.addEventListener("click", () => handlers.onAskAssistant());
      row.append(label, ask);
      this.askButton = ask;
    }
    for (const { rating: r, text, label } of RATING_BUTTONS) {
      const b = doc.createElement("button");
      b.type = "button";
      b.className = `message-action rate rate-${r}`;
      b.textContent = text;
      b.title = label;
      b.setAttribute("aria-label", label);
      b.dataset["rating"] = r;
      b.addEventListener("click", () => handlers.onRate(r));
      row.appendChild(b);
      this.rateButtons.push([r, b]);
    }
    (this.meta ?? this.element).after(row);
    this.actions = row;
    this.setRating(rating);
  }
  /** Mark the recorded rating: `aria-pressed="true"` on its button, "false" on the other. */
  setRating(rating) {
    this.currentRating = rating;
    const pressed = pressedStates(rating);
    for (const [r, b] of this.rateButtons) b.setAttribute("aria-pressed", pressed[r]);
  }
  /** Enable or disable "Ask the assistant instead" (no-op without one). */
  setAskEnabled(enabled) {
    if (this.askButton !== null) this.askButton.disabled = !enabled;
  }
  /** Disable every button under the answer (e.g. while it is being asked again). */
  setActionsEnabled(enabled) {
    for (const [, b] of this.rateButtons) b.disabled = !enabled;
    if (!enabled) this.setAskEnabled(false);
  }
  /**
   * The answer is generated again into this message (`chat.accepted` of a `chat.regenerate`):
   * empty it, drop its label, buttons and stats line, and mark it streaming.
   */
  restart() {
    this.removeActions();
    this.meta?.remove();
    this.meta = null;
    this.text = null;
    this.element.replaceChildren();
    delete this.element.dataset["source"];
    this.element.removeAttribute("aria-describedby");
    this.setStatus("streaming");
  }
  remove() {
    this.removeActions();
    this.meta?.remove();
    this.element.remove();
  }
  removeActions() {
    this.actions?.remove();
    this.actions = null;
    this.askButton = null;
    this.rateButtons = [];
    this.currentRating = null;
  }
};
function setMessageStatus(el, status) {
  el.dataset["status"] = status;
  if (status === "streaming" || status === "pending") el.setAttribute("aria-busy", "true");
  else el.removeAttribute("aria-busy");
}
function readJsonScript(doc, id) {
  const el = doc.getElementById(id);
  if (el === null || el.textContent === null) return void 0;
  try {
    return JSON.parse(el.textContent);
  } catch {
    return void 0;
  }
}
function parseHistory(data) {
  if (!Array.isArray(data)) return [];
  const out = [];
  for (const item of data) {
    if (typeof item !== "object" || item === null) continue;
    const o = item;
    const role = o["role"];
    if (role !== "user" && role !== "assistant") continue;
    out.push({
      id: typeof o["id"] === "string" ? o["id"] : String(o["id"] ?? ""),
      role,
      content: typeof o["content"] === "string" ? o["content"] : "",
      status: typeof o["status"] === "string" && o["status"] !== "" ? o["status"] : "complete",
      source: parseSource(o["source"]),
      feedback: parseRating(o["feedback"])
    });
  }
  return out;
}
function renderTemplateOptions(select, templates, selectedId, extra = null) {
  const doc = select.ownerDocument;
  const none = doc.createElement("option");
  none.value = "";
  none.textContent = "No template";
  const options = [none];
  const all = extra !== null && !templates.some((t) => t.id === extra.id) ? [...templates, { ...extra, name: `${extra.name} (no longer offered)` }] : templates;
  for (const t of all) {
    const o = doc.createElement("option");
    o.value = String(t.id);
    o.textContent = t.name;
    if (t.description !== "") o.title = t.description;
    options.push(o);
  }
  select.replaceChildren(...options);
  select.value = selectedId === null ? "" : String(selectedId);
  if (select.selectedIndex < 0) select.selectedIndex = 0;
}
function selectedTemplateId(select) {
  const v = select.value;
  if (v === "") return null;
  const n = Number(v);
  return Number.isInteger(n) ? n : null;
}
function renderVariableFields(container, fields, values = {}) {
  const doc = container.ownerDocument;
  const nodes = [];
  fields.forEach((f, i) => {
    const id = `template-var-${i}`;
    const wrap = doc.createElement("div");
    wrap.className = "template-field";
    const label = doc.createElement("label");
    label.htmlFor = id;
    label.textContent = f.label;
    let input;
    if (f.type === "choice") {
      const sel = doc.createElement("select");
      const empty = doc.createElement("option");
      empty.value = "";
      empty.textContent = f.required ? "Choose…" : "—";
      sel.appendChild(empty);
      for (const c of f.choices) {
        const o = doc.createElement("option");
        o.value = c;
        o.textContent = c;
        sel.appendChild(o);
      }
      input = sel;
    } else {
      const inp = doc.createElement("input");
      if (f.type === "integer") {
        inp.type = "number";
        inp.step = "1";
        inp.inputMode = "numeric";
      } else {
        inp.type = "text";
      }
      input = inp;
    }
    input.id = id;
    input.name = f.name;
    input.dataset["variable"] = f.name;
    input.required = f.required;
    const v = Object.prototype.hasOwnProperty.call(values, f.name) ? values[f.name] : void 0;
    if (v !== void 0) input.value = v;
    wrap.append(label, input);
    nodes.push(wrap);
  });
  container.replaceChildren(...nodes);
}
function variableInputs(container) {
  return Array.from(container.querySelectorAll("[data-variable]"));
}
function readVariableFields(container) {
  const entries = [];
  for (const el of variableInputs(container)) entries.push([el.dataset["variable"] ?? "", el.value]);
  return Object.fromEntries(entries);
}
function markVariableErrors(container, invalidNames) {
  let first = null;
  for (const el of variableInputs(container)) {
    if (invalidNames.includes(el.dataset["variable"] ?? "")) {
      el.setAttribute("aria-invalid", "true");
      first ?? (first = el);
    } else {
      el.removeAttribute("aria-invalid");
    }
  }
  return first;
}

// src/chat.ts
function newId() {
  const c = globalThis.crypto;
  if (typeof c.randomUUID === "function") return c.randomUUID();
  const b = c.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] ?? 0) & 15 | 64;
  b[8] = (b[8] ?? 0) & 63 | 128;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
var STATE_TEXT = {
  connecting: "connecting…",
  connected: "connected",
  reconnecting: "reconnecting…"
};
var ChatController = class {
  constructor(el, conversationId, now = () => performance.now()) {
    this.el = el;
    this.conversationId = conversationId;
    this.now = now;
    this.transport = null;
    this.pending = null;
    this.active = null;
    this.regenerating = null;
    /** The assistant messages on the page, by id, and the conversation's newest one. */
    this.answers = /* @__PURE__ */ new Map();
    this.newestAnswerId = null;
    /** chat.feedback frames waiting for chat.feedback_recorded, by client id. */
    this.feedbackSent = /* @__PURE__ */ new Map();
    /** A templated send is being prepared (patch + hash are computed asynchronously). */
    this.preparing = false;
    this.countdown = null;
    this.store = null;
    this.draft = new TemplateDraft();
    this.doc = el.log.ownerDocument;
  }
  attach(transport) {
    this.transport = transport;
    const { form, input, stop } = this.el;
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      this.submit();
    });
    input.addEventListener("keydown", (ev) => {
      if (ev.key !== "Enter" || ev.shiftKey || ev.isComposing || ev.keyCode === 229) return;
      ev.preventDefault();
      this.submit();
    });
    stop.addEventListener("click", () => this.requestStop());
    this.updateControls();
  }
  /** Offer the templates of `store` when starting a new conversation. */
  attachTemplates(store) {
    this.store = store;
    const t = this.el.templates;
    if (t === null) return;
    store.subscribe(() => this.onTemplateList());
    t.select.addEventListener("change", () => this.onTemplateSelected());
    const onValues = () => this.onVariablesInput();
    t.variables.addEventListener("input", onValues);
    t.variables.addEventListener("change", onValues);
    t.variables.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && ev.target instanceof HTMLInputElement) ev.preventDefault();
    });
    this.onTemplateList();
  }
  renderHistory(data) {
    for (const item of parseHistory(data)) {
      const view = new MessageView(this.doc, item.role, item.status, item.id, item.content);
      this.el.log.appendChild(view.element);
      if (item.role === "assistant") {
        this.registerAnswer(view);
        if (isFinishedAnswer(item.status)) this.addAnswerActions(view, item.source, item.feedback);
        else if (item.status === "streaming" && item.id !== null && this.active === null) {
          view.restart();
          this.startStreaming(item.id, view, this.now());
        }
      }
    }
    this.el.log.scrollTop = this.el.log.scrollHeight;
    this.updateAnswerControls();
  }
  // ---- connection ----
  onConnectionState(state) {
    this.el.status.textContent = STATE_TEXT[state];
    this.el.status.dataset["state"] = state;
  }
  onOpen() {
    if (this.pending !== null) this.transmit(this.pending);
    const r = this.regenerating;
    if (r !== null) {
      this.regenerating = null;
      r.view.restart();
      this.startStreaming(r.messageId, r.view, r.sentAt);
    }
    const a = this.active;
    if (a !== null) {
      a.view.setMeta("");
      this.transport?.send(JSON.stringify(resumeFrame(newId(), a.messageId, a.lastSeq)));
    }
  }
  onClose() {
    if (this.pending !== null) this.pending.transmitted = false;
    this.feedbackSent.clear();
    const a = this.active;
    if (a !== null) {
      a.stopId = null;
      a.view.setMeta("connection lost · reconnecting to continue the answer…");
    }
    this.updateControls();
  }
  onMessage(raw) {
    const frame = parseServerFrame(raw);
    if (frame === null) {
      console.warn("chat: ignoring unexpected frame", raw);
      return;
    }
    switch (frame.type) {
      case "chat.accepted":
        return this.onAccepted(frame);
      case "chat.delta":
        return this.onDelta(frame);
      case "chat.done":
        return this.onDone(frame);
      case "chat.snapshot":
        return this.onSnapshot(frame);
      case "chat.feedback_recorded":
        return this.onFeedbackRecorded(frame);
      case "chat.error":
        return this.onError(frame);
      case "chat.resend_full":
        return this.onResendFull(frame);
      case "templates.changed":
        void this.store?.changed(frame.etag);
        return;
    }
  }
  // ---- user actions ----
  get busy() {
    return this.preparing || this.pending !== null || this.regenerating !== null || this.active !== null;
  }
  submit() {
    if (this.busy) return;
    const template = this.conversationId === null ? this.draft.template : null;
    if (template !== null && this.el.templates !== null) {
      void this.submitTemplated(template, this.el.templates);
      return;
    }
    const text = this.el.input.value;
    if (text.trim() === "") return;
    this.clearAlert();
    this.startSend(sendFrame(newId(), this.conversationId, text), text);
  }
  /** The first message of a new conversation, from the selected template. */
  async submitTemplated(template, t) {
    const { variables, errors } = validateVariables(template, readVariableFields(t.variables));
    const firstInvalid = markVariableErrors(
      t.variables,
      errors.map((e) => e.name)
    );
    if (errors.length > 0) {
      this.showAlert(errors.map((e) => e.message).join(" "));
      firstInvalid?.focus();
      return;
    }
    if (this.draft.untouched(this.el.input.value)) {
      const base = renderBody(template.body, variables);
      this.el.input.value = base;
      this.draft.base = base;
    }
    const edited = this.el.input.value;
    if (edited.trim() === "") return;
    this.clearAlert();
    const id = newId();
    this.preparing = true;
    this.updateControls();
    let frame;
    try {
      frame = await buildTemplatedSend(id, template, variables, edited);
    } catch (err) {
      console.warn("chat: templated send falls back to the full text", err);
      frame = templatedSendFrame(id, template, variables, { kind: "text", text: edited });
    } finally {
      this.preparing = false;
    }
    this.startSend(frame, edited);
  }
  startSend(frame, fullText) {
    const user = new MessageView(this.doc, "user", "pending", null, fullText);
    this.appendToLog(user.element, true);
    this.pending = { frame, user, transmitted: false, sentAt: this.now(), fullText, resent: false };
    this.transmit(this.pending);
    this.updateControls();
  }
  requestStop() {
    const a = this.active;
    if (a === null || a.stopId !== null) return;
    const id = newId();
    if (this.transport?.send(JSON.stringify(stopFrame(id, a.messageId))) !== true) {
      this.showAlert("Not connected: could not stop the answer.");
      return;
    }
    a.stopId = id;
    this.updateControls();
  }
  /**
   * "Ask the assistant instead" under a FAQ answer: answer the same question again with the
   * model, into the same message. Only the conversation's newest answer, and only while
   * nothing is sent or streaming (the button is disabled otherwise).
   */
  askAssistant(messageId) {
    const view = this.answers.get(messageId);
    if (view === void 0) return;
    if (!canAskAssistant({ source: view.source, messageId, newestAnswerId: this.newestAnswerId, busy: this.busy })) return;
    const id = newId();
    const sentAt = this.now();
    if (this.transport?.send(JSON.stringify(regenerateFrame(id, messageId, true))) !== true) {
      this.showAlert("Not connected: could not ask the assistant.");
      return;
    }
    this.clearAlert();
    this.regenerating = { id, messageId, view, sentAt };
    view.setActionsEnabled(false);
    this.updateControls();
  }
  /** Thumbs up/down: marked as pressed once the server answers chat.feedback_recorded. */
  rate(messageId, rating) {
    const id = newId();
    if (this.transport?.send(JSON.stringify(feedbackFrame(id, messageId, rating))) !== true) {
      this.showAlert("Not connected: could not send your rating.");
      return;
    }
    this.feedbackSent.set(id, { messageId, rating });
  }
  // ---- server frames ----
  onAccepted(f) {
    const r = this.regenerating;
    if (r !== null && r.id === f.id) {
      this.onRegenerateAccepted(r, f);
      return;
    }
    const p = this.pending;
    if (p === null || p.frame.id !== f.id) return;
    this.pending = null;
    this.conversationId = f.conversation_id;
    this.updateUrl(f.conversation_id);
    if (this.el.input.value === p.fullText) this.el.input.value = "";
    this.closeTemplates();
    p.user.messageId = f.user_message_id;
    p.user.setStatus("complete");
    const view = new MessageView(this.doc, "assistant", "streaming", f.assistant_message_id);
    this.appendToLog(view.element, true);
    this.registerAnswer(view);
    this.startStreaming(f.assistant_message_id, view, p.sentAt);
  }
  /** The server restarted the answer: stream the new one into the same message element. */
  onRegenerateAccepted(r, f) {
    this.regenerating = null;
    const view = this.answers.get(f.assistant_message_id) ?? r.view;
    view.restart();
    this.startStreaming(f.assistant_message_id, view, r.sentAt);
  }
  startStreaming(messageId, view, sentAt) {
    this.active = {
      messageId,
      view,
      sentAt,
      firstDeltaAt: null,
      firstPaintAt: null,
      lastSeq: 0,
      stopId: null,
      done: null
    };
    this.updateControls();
  }
  onDelta(f) {
    const a = this.active;
    if (a === null || a.messageId !== f.message_id) return;
    if (f.seq <= a.lastSeq) return;
    if (f.seq !== a.lastSeq + 1) console.warn(`chat: delta gap, expected seq ${a.lastSeq + 1}, got ${f.seq}`);
    a.lastSeq = f.seq;
    const stick = this.nearBottom();
    a.view.append(f.text);
    if (stick) this.el.log.scrollTop = this.el.log.scrollHeight;
    if (a.firstDeltaAt === null && f.text !== "") {
      a.firstDeltaAt = this.now();
      if (typeof requestAnimationFrame === "function") {
        requestAnimationFrame(() => {
          a.firstPaintAt = this.now();
          if (a.done !== null) this.renderStats(a, a.done);
        });
      }
    }
  }
  onDone(f) {
    const a = this.active;
    if (a === null || a.messageId !== f.message_id) {
      const view = this.answers.get(f.message_id);
      if (view === void 0 || this.regenerating?.view === view) {
        this.setStatusById(f.message_id, f.status);
        return;
      }
      view.setStatus(f.status);
      this.addAnswerActions(view, f.source, view.rating);
      this.updateControls();
      return;
    }
    this.active = null;
    a.done = f;
    a.view.setStatus(f.status);
    this.renderStats(a, f);
    this.addAnswerActions(a.view, f.source, null);
    this.updateControls();
    this.el.input.focus();
  }
  /** The server could not replay the missing part exactly: show its whole stored text. */
  onSnapshot(f) {
    const a = this.active;
    if (a === null || a.messageId !== f.message_id) return;
    a.view.restart();
    a.view.append(f.content);
    a.lastSeq = Number.MAX_SAFE_INTEGER;
  }
  onFeedbackRecorded(f) {
    this.feedbackSent.delete(f.id);
    this.answers.get(f.message_id)?.setRating(f.rating);
  }
  /** "first token 142 ms (server 97 ms) · 23 tokens" under the answer. */
  renderStats(a, f) {
    const first = a.firstPaintAt ?? a.firstDeltaAt;
    const clientTtft = first === null ? null : Math.max(0, first - a.sentAt);
    const data = {};
    if (clientTtft !== null) data["ttftMs"] = String(Math.round(clientTtft));
    if (f.timings.ttft_ms !== null) data["serverTtftMs"] = String(f.timings.ttft_ms);
    a.view.setMeta(
      formatAnswerStats({
        clientTtftMs: clientTtft,
        serverTtftMs: f.timings.ttft_ms,
        completionTokens: f.usage.completion_tokens,
        status: f.status,
        finishReason: f.finish_reason
      }),
      data
    );
  }
  onError(f) {
    if (f.retry_after_s !== null && f.retry_after_s > 0) this.showCountdown(f.message || `Error: ${f.code}`, f.retry_after_s);
    else this.showAlert(f.message || `Error: ${f.code}`);
    if (f.id !== null && this.feedbackSent.delete(f.id)) return;
    const r = this.regenerating;
    if (r !== null && f.id === r.id) {
      this.regenerating = null;
      r.view.setActionsEnabled(true);
      this.updateControls();
      return;
    }
    const p = this.pending;
    if (p !== null && f.id === p.frame.id) {
      this.pending = null;
      p.user.remove();
      this.updateControls();
      this.el.input.focus();
      if (f.code === "template_unknown" && p.frame.template !== void 0) void this.afterTemplateUnknown(p.frame.template.id);
      return;
    }
    const a = this.active;
    if (a !== null && f.message_id === a.messageId && (a.stopId === null || f.id !== a.stopId)) {
      this.active = null;
      a.view.setStatus("failed");
      a.view.setMeta("failed");
      this.updateControls();
      return;
    }
    if (a !== null && a.stopId !== null && f.id === a.stopId) {
      a.stopId = null;
      this.updateControls();
      return;
    }
    if (f.message_id !== null && f.code === "engine") this.setStatusById(f.message_id, "failed");
  }
  /**
   * The server could not rebuild the templated text exactly: resend the same frame (same
   * id, template and variables) with the full text, once. A second request means the
   * server cannot take it; the text stays in the textbox.
   */
  onResendFull(f) {
    const p = this.pending;
    if (p === null || p.frame.id !== f.id) return;
    if (p.resent) {
      this.pending = null;
      p.user.remove();
      this.showAlert("The message could not be sent from the template. Your text is kept: send it again, or choose “No template”.");
      this.updateControls();
      this.el.input.focus();
      return;
    }
    p.resent = true;
    p.frame = withFullText(p.frame, p.fullText);
    p.transmitted = false;
    this.transmit(p);
  }
  // ---- templates ----
  get offerTemplates() {
    return this.conversationId === null && this.el.templates !== null && this.store !== null;
  }
  /** The store's list changed (cache loaded, revalidated, or pushed). */
  onTemplateList() {
    const t = this.el.templates;
    const store = this.store;
    if (t === null || store === null) return;
    if (this.offerTemplates) this.followNewVersion(t, store);
    renderTemplateOptions(t.select, store.templates, this.draft.template?.id ?? null, this.draft.template);
    this.updatePicker();
  }
  /**
   * The selected template was republished (or withdrawn). Choice, kept simple: only while
   * the textbox still holds the untouched render (the user has not typed in it) do we move
   * to the new version and re-render it (the variable values are kept by name). Once the
   * user has typed, their edits are relative to the old body, so the old reference stays:
   * the server takes it if that version is still published, answers `chat.resend_full`
   * (then the full text is resent) or `template_unknown` (then see afterTemplateUnknown).
   * Nothing changes while a send is in flight: its frame carries its own reference.
   */
  followNewVersion(t, store) {
    const cur = this.draft.template;
    if (cur === null || this.busy) return;
    const fresh = store.find(cur.id);
    if (fresh !== null && fresh.version === cur.version && fresh.sha256 === cur.sha256) return;
    if (!this.draft.untouched(this.el.input.value)) return;
    this.switchTemplate(t, fresh);
    if (fresh === null) this.showAlert(`The template “${cur.name}” is no longer available.`);
  }
  /** After `template_unknown`: refetch, then move to the current version (keeping the text) or drop the template. */
  async afterTemplateUnknown(templateId) {
    const t = this.el.templates;
    const store = this.store;
    if (t === null || store === null) return;
    await store.revalidate();
    const cur = this.draft.template;
    if (!this.offerTemplates || this.busy || cur === null || cur.id !== templateId) return;
    const fresh = store.find(templateId);
    if (fresh !== null && fresh.version === cur.version && fresh.sha256 === cur.sha256) return;
    this.switchTemplate(t, fresh);
    renderTemplateOptions(t.select, store.templates, this.draft.template?.id ?? null, this.draft.template);
    this.updatePicker();
    this.showAlert(
      fresh !== null ? `The template “${fresh.name}” was updated. Check your message, then send it again.` : `The template “${cur.name}” is no longer available. Your text is kept: send it without a template.`
    );
  }
  /** Select `template` (null: none), keeping the typed variable values by name and any typed text. */
  switchTemplate(t, template) {
    renderVariableFields(t.variables, template?.variables ?? [], readVariableFields(t.variables));
    const text = this.draft.select(template, readVariableFields(t.variables), this.el.input.value);
    if (text !== null) this.el.input.value = text;
  }
  onTemplateSelected() {
    const t = this.el.templates;
    if (t === null || this.store === null) return;
    const id = selectedTemplateId(t.select);
    const held = this.draft.template;
    const template = id === null ? null : this.store.find(id) ?? (held !== null && held.id === id ? held : null);
    renderVariableFields(t.variables, template?.variables ?? []);
    const text = this.draft.select(template, readVariableFields(t.variables), this.el.input.value);
    if (text !== null) this.el.input.value = text;
  }
  onVariablesInput() {
    const t = this.el.templates;
    if (t === null) return;
    const text = this.draft.update(readVariableFields(t.variables), this.el.input.value);
    if (text !== null) this.el.input.value = text;
  }
  /** The conversation exists: templates are only for its first message. */
  closeTemplates() {
    const t = this.el.templates;
    this.draft.clear();
    if (t === null) return;
    t.select.value = "";
    t.variables.replaceChildren();
    this.updatePicker();
  }
  updatePicker() {
    const t = this.el.templates;
    if (t === null) return;
    const any = (this.store?.templates.length ?? 0) > 0 || this.draft.template !== null;
    t.picker.hidden = !(this.offerTemplates && any);
  }
  // ---- helpers ----
  transmit(p) {
    if (p.transmitted) return;
    p.sentAt = this.now();
    p.transmitted = this.transport?.send(JSON.stringify(p.frame)) === true;
  }
  updateControls() {
    this.el.send.disabled = this.busy;
    this.el.stop.disabled = this.active === null || this.active.stopId !== null;
    this.updateAnswerControls();
  }
  /** "Ask the assistant instead" is usable on the newest answer only, while nothing streams. */
  updateAnswerControls() {
    const busy = this.busy;
    for (const [messageId, view] of this.answers) {
      view.setAskEnabled(canAskAssistant({ source: view.source, messageId, newestAnswerId: this.newestAnswerId, busy }));
    }
  }
  registerAnswer(view) {
    const id = view.messageId;
    if (id === null || id === "") return;
    this.answers.set(id, view);
    this.newestAnswerId = id;
  }
  /** The FAQ label and the buttons under a finished answer. */
  addAnswerActions(view, source, rating) {
    view.showAnswerActions(source, rating, {
      onAskAssistant: () => {
        const id = view.messageId;
        if (id !== null) this.askAssistant(id);
      },
      onRate: (r) => {
        const id = view.messageId;
        if (id !== null) this.rate(id, r);
      }
    });
  }
  showAlert(message) {
    this.stopCountdown();
    this.el.alert.textContent = message;
    this.el.alert.hidden = false;
  }
  clearAlert() {
    this.stopCountdown();
    this.el.alert.textContent = "";
    this.el.alert.hidden = true;
  }
  /** "Busy" with a retry-after: count the seconds down, then clear the alert. */
  showCountdown(message, seconds) {
    this.showAlert(message);
    let left = Math.ceil(seconds);
    const render = () => {
      this.el.alert.textContent = `${message} (${left} s)`;
    };
    render();
    this.countdown = setInterval(() => {
      left -= 1;
      if (left > 0) render();
      else this.clearAlert();
    }, 1e3);
  }
  stopCountdown() {
    if (this.countdown !== null) clearInterval(this.countdown);
    this.countdown = null;
  }
  updateUrl(conversationId) {
    const path = `/c/${encodeURIComponent(conversationId)}/`;
    if (globalThis.location?.pathname !== path) history.replaceState(history.state, "", path);
  }
  /** Status change for a message this page is not streaming (e.g. one from the history). */
  setStatusById(messageId, status) {
    for (const el of Array.from(this.el.log.querySelectorAll(".message[data-message-id]"))) {
      if (el.dataset["messageId"] === messageId) setMessageStatus(el, status);
    }
  }
  nearBottom() {
    const log = this.el.log;
    return log.scrollHeight - log.scrollTop - log.clientHeight < 48;
  }
  appendToLog(node, scroll) {
    this.el.log.appendChild(node);
    if (scroll) this.el.log.scrollTop = this.el.log.scrollHeight;
  }
};
function required(doc, id, type) {
  const el = doc.getElementById(id);
  if (!(el instanceof type)) throw new Error(`chat: missing #${id}`);
  return el;
}
function templateElements(doc) {
  const picker = doc.getElementById("template-picker");
  const select = doc.getElementById("template-select");
  const variables = doc.getElementById("template-variables");
  if (!(picker instanceof HTMLElement && select instanceof HTMLSelectElement && variables instanceof HTMLElement)) return null;
  return { picker, select, variables };
}
function start(doc = document) {
  const el = {
    log: required(doc, "chat-log", HTMLElement),
    form: required(doc, "chat-form", HTMLFormElement),
    input: required(doc, "chat-input", HTMLTextAreaElement),
    send: required(doc, "chat-send", HTMLButtonElement),
    stop: required(doc, "chat-stop", HTMLButtonElement),
    alert: required(doc, "chat-alert", HTMLElement),
    status: required(doc, "connection-status", HTMLElement),
    templates: templateElements(doc)
  };
  const conv = readJsonScript(doc, "conversation-id");
  const controller = new ChatController(el, typeof conv === "string" && conv !== "" ? conv : null);
  controller.renderHistory(readJsonScript(doc, "chat-history"));
  const store = new TemplateStore({ fetch: (url, init) => fetch(url, init), storage: browserStorage() });
  store.load();
  controller.attachTemplates(store);
  void store.revalidate();
  const socket = new ReconnectingSocket(chatSocketUrl(location), {
    onOpen: () => controller.onOpen(),
    onMessage: (data) => controller.onMessage(data),
    onClose: () => controller.onClose(),
    onState: (state) => controller.onConnectionState(state)
  });
  controller.attach(socket);
  socket.start();
  return controller;
}
if (typeof document !== "undefined" && document.getElementById("chat-log") !== null) {
  start();
}
export {
  ChatController,
  newId,
  start
};
//# sourceMappingURL=chat.js.map
